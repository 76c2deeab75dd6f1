//! Operators: the JSON operator API and the admin page. Who may use them is
//! decided by the `Operator` and `OperatorForm` extractors.

pub mod api;
pub mod codes;
mod drop_view;
pub mod page;
pub mod report;
pub mod report_page;
mod room_form;
