//! The pages in a real browser (headless Chromium over WebDriver): the
//! waiting, sale and admin pages (a drop's schedule and autotune among
//! them), their branding, axe-core's checks, the
//! client module from another origin, and the pages' scripts in Node.

mod accessibility;
mod branding;
mod browser;
mod cross_origin;
mod drop;
mod notify;
mod page_scripts;
