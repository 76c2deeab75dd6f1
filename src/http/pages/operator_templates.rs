//! The operator's own waiting page (`--templates-dir`, api.md "The page:
//! branding and languages"): `room-{room}.html` for one room, else
//! `room.html` (either may extend or include the directory's other `.html`
//! files), read once at start and rendered with minijinja (HTML
//! autoescaped) from the variables docs/src/branding.md lists. A template
//! that did not load or does not render gives way to the built-in page,
//! and a warning says which room, which file and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior, Value};
use serde::Serialize;

use crate::http::refusal_log::RefusalLog;
use crate::words::RoomId;
use crate::words::clock::Millis;
use crate::words::page::PageBranding;

/// The template every room uses unless it has its own.
const SHARED: &str = "room.html";

/// The operator's templates, as read at start.
#[derive(Default)]
pub struct OperatorTemplates {
    dir: Option<PathBuf>,
    /// The templates that parsed.
    env: Environment<'static>,
    /// The templates that did not parse (or could not be read), and why.
    broken: BTreeMap<String, String>,
    /// A failing template is tried on every page view: one warning per
    /// template every 10 s, saying how many were left out, not one a view.
    warnings: RefusalLog,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot read the templates directory {dir}: {source}")]
pub struct TemplatesDirError {
    dir: String,
    source: std::io::Error,
}

/// What the built-in waiting page is rendered from, as a template sees it
/// (docs/src/branding.md lists each).
#[derive(Serialize)]
pub struct RoomPageVars<'a> {
    pub room: RoomVars<'a>,
    pub page: PageVars<'a>,
    /// The language the texts are in (`<html lang>`).
    pub lang: &'a str,
    /// The `room.` texts in that language, keyed without `room.`.
    pub texts: BTreeMap<&'a str, &'a str>,
    /// The same texts as JSON for `<script id="wr-texts" type="application/json">`
    /// (safe inside that element), which room.js reads.
    #[serde(skip)]
    pub texts_json: &'a str,
    /// The title, headline and introduction the built-in page shows: the
    /// page's own, else the defaults.
    pub title: &'a str,
    pub headline: &'a str,
    pub intro: &'a str,
    pub keep_open: &'a str,
    pub abandon_after_s: u64,
    pub returning: bool,
    pub site_url: &'a str,
    /// The script and stylesheets the built-in page loads.
    pub script_url: &'a str,
    pub style_url: &'a str,
    /// The room's colours, `None` when it sets none.
    pub room_style_url: Option<&'a str>,
    /// The Content-Security-Policy the page is served with.
    pub csp: &'a str,
}

#[derive(Serialize)]
pub struct RoomVars<'a> {
    pub id: &'a str,
    pub name: &'a str,
}

/// The page's fields, each `none` when unset.
#[derive(Serialize)]
pub struct PageVars<'a> {
    pub title: Option<&'a str>,
    pub headline: Option<&'a str>,
    pub message: Option<&'a str>,
    pub logo_url: Option<&'a str>,
    pub accent_color: Option<&'a str>,
    pub background_color: Option<&'a str>,
    pub footer: Option<&'a str>,
}

impl<'a> From<&'a PageBranding> for PageVars<'a> {
    fn from(page: &'a PageBranding) -> Self {
        Self {
            title: page.title.as_deref(),
            headline: page.headline.as_deref(),
            message: page.message.as_deref(),
            logo_url: page.logo_url.as_deref(),
            accent_color: page.accent_color.as_deref(),
            background_color: page.background_color.as_deref(),
            footer: page.footer.as_deref(),
        }
    }
}

/// Whether `name` is a template: every `.html` file is read, so that the
/// pages (`room.html`, `room-{room}.html`) may `{% extends %}` or
/// `{% include %}` the others.
fn is_template(name: &str) -> bool {
    name.ends_with(".html")
}

impl OperatorTemplates {
    /// No directory: every room gets the built-in page.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads every `.html` file in `dir` (not its subdirectories). A directory
    /// that cannot be read stops the start; a template that does not parse
    /// is logged now and gives way to the built-in page when used.
    pub fn load(dir: &Path) -> Result<Self, TemplatesDirError> {
        let unreadable = |source| TemplatesDirError {
            dir: dir.display().to_string(),
            source,
        };
        let mut templates = Self {
            dir: Some(dir.to_path_buf()),
            env: environment(),
            broken: BTreeMap::new(),
            warnings: RefusalLog::default(),
        };
        for entry in std::fs::read_dir(dir).map_err(unreadable)? {
            let entry = entry.map_err(unreadable)?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if !is_template(&name) {
                continue;
            }
            let loaded = std::fs::read_to_string(entry.path())
                .map_err(|error| error.to_string())
                .and_then(|source| {
                    templates
                        .env
                        .add_template_owned(name.clone(), source)
                        .map_err(|error| describe(&error))
                });
            match loaded {
                Ok(()) => {
                    tracing::info!(template = %name, dir = %dir.display(), "operator template loaded")
                }
                Err(error) => {
                    tracing::warn!(template = %name, dir = %dir.display(), %error, "operator template did not load: the built-in page is used instead");
                    templates.broken.insert(name, error);
                }
            }
        }
        Ok(templates)
    }

    /// The template `room` uses, if the directory has one for it.
    fn template_for(&self, room: &RoomId) -> Option<String> {
        let own = format!("room-{room}.html");
        [own, SHARED.to_string()]
            .into_iter()
            .find(|name| self.broken.contains_key(name) || self.env.get_template(name).is_ok())
    }

    /// The operator's page for `room`, or `None` for the built-in one (no
    /// template for it, or one that fails at `now`: then a warning says why).
    pub fn render(&self, room: &RoomId, vars: &RoomPageVars<'_>, now: Millis) -> Option<String> {
        let name = self.template_for(room)?;
        let warn = |error: &str, message: &str| {
            let Some(left_out) = self.warnings.admit(&name, now) else {
                return;
            };
            let dir = self
                .dir
                .as_deref()
                .map(|d| d.display().to_string())
                .unwrap_or_default();
            tracing::warn!(%room, template = %name, %dir, %error, left_out, "{message}");
        };
        if let Some(error) = self.broken.get(&name) {
            warn(
                error,
                "operator template did not load: showing the built-in page",
            );
            return None;
        }
        let rendered = self
            .env
            .get_template(&name)
            .and_then(|template| template.render(context(vars)));
        match rendered {
            Ok(html) => Some(html),
            Err(error) => {
                warn(
                    &describe(&error),
                    "operator template failed to render: showing the built-in page",
                );
                None
            }
        }
    }
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // A variable the template names that does not exist is an error when
    // printed (so a typo shows in the log), not silently empty; `{% if %}`
    // on one is false.
    env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
    env
}

/// The template's variables; `texts_json` is marked safe (it is JSON made
/// safe for a `<script>` element, and escaping it would break it).
fn context(vars: &RoomPageVars<'_>) -> Value {
    minijinja::context! {
        texts_json => Value::from_safe_string(vars.texts_json.to_string()),
        ..Value::from_serialize(vars)
    }
}

/// minijinja's error with the line it happened on and what led to it.
fn describe(error: &minijinja::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
