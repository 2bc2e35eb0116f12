//! `qbench report`: a sweep's cell files, judged anew if asked, as one HTML page with its
//! heatmaps and scaling charts beside it as SVG files named after the page, so that two
//! reports of one directory keep their own.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use qbench_core::report::compare::{CompareReport, Comparison};
use qbench_core::scenario::cell::{CellFile, CellReport};
use qbench_core::scenario::Cell;
use qbench_core::stats::discoveries;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_engine::error::ConfigError;
use qbench_engine::files::{resolve, Target};

use crate::export::html::{page, Page, Sweep, GENERATOR};
use crate::export::write_text;
use crate::flags::cli::ReportArgs;

/// The page's name in the sweep's directory when `--html` is not given.
pub const DEFAULT_PAGE: &str = "report.html";

pub fn report(args: ReportArgs) -> anyhow::Result<()> {
    // A sweep's directory, or a report: a file, or a FIFO (`<(...)`); a missing path is named
    // as the report it would be, never as a page in it.
    if !args.dir.is_dir() {
        return super::report_file::report_file(&args);
    }
    let html = args
        .html
        .clone()
        .unwrap_or_else(|| args.dir.join(DEFAULT_PAGE));
    check_page_dest(&html, args.html.is_none())?;
    let files = cell_files(&args.dir)?;
    let inputs: Vec<_> = files
        .iter()
        .map(|f| ("a cell file of DIR", f.as_path()))
        .collect();
    qbench_engine::files::check_not_inputs(&[("--html", &html)], &inputs)?;
    let mut sweep = read_cells(&args.dir, &files)?;
    if args.metric.is_some() || args.test.is_some() {
        rejudge(&mut sweep.comparisons, args.metric, args.test)?;
    }
    sweep.fdr = args
        .fdr
        .level()
        .map(|level| control_fdr(&sweep.comparisons, level));
    let cells = sweep.comparisons.len();
    let page = page(sweep)?;
    write_page(&html, &page)?;
    crate::say!(
        "wrote {} ({} cells, {} heatmap(s), {} scaling chart(s), latency CDFs, cwnd timelines and state shares per cell)",
        html.display(),
        cells,
        page.heatmaps.len(),
        page.charts.len()
    );
    Ok(())
}

fn html_error(message: String) -> anyhow::Error {
    ConfigError {
        flag: "--html",
        message,
    }
    .into()
}

/// The heatmaps and charts are SVG files beside the page: a stream or a device has no
/// "beside". A directory still missing is created when the page is written. The default
/// page, which the user did not name, replaces only an earlier report.
fn check_page_dest(html: &Path, default: bool) -> anyhow::Result<()> {
    if !matches!(resolve(html), Ok(Target::Replace(_))) {
        qbench_engine::files::check_writable("--html", html)?;
        return Err(html_error(format!(
            "{}: the page's heatmaps and charts are written beside it as SVG files; name a file",
            html.display()
        )));
    }
    if beside(html).is_dir() {
        qbench_engine::files::check_writable("--html", html)?;
    }
    if default
        && html.exists()
        && !starts_with_mark(html, 4096, &format!("content=\"{GENERATOR}\""))
    {
        return Err(html_error(format!(
            "{} exists and is not a page of `qbench report`; name the page with --html",
            html.display()
        )));
    }
    Ok(())
}

/// The directory the page and its SVG files go to.
fn beside(html: &Path) -> &Path {
    html.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Whether the first `limit` bytes of the file at `path` hold `mark`.
fn starts_with_mark(path: &Path, limit: u64, mark: &str) -> bool {
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit).read_to_end(&mut head))
        .is_ok()
        && String::from_utf8_lossy(&head).contains(mark)
}

/// The sweep's cell files in `dir`.
fn cell_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = e?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("cell-") && name.ends_with(".json") {
            files.push(path);
        }
    }
    Ok(files)
}

fn read_cells(dir: &Path, files: &[PathBuf]) -> anyhow::Result<Sweep> {
    let mut comparisons = Vec::new();
    let mut competitions = Vec::new();
    let mut scenario: Option<String> = None;
    for path in files {
        let bytes = qbench_engine::files::read_bytes(
            path,
            qbench_core::spec::input::MAX_REPORT_BYTES,
            "a cell file",
        )
        .map_err(anyhow::Error::msg)?;
        let f = CellFile::from_slice(&bytes).with_context(|| path.display().to_string())?;
        scenario.get_or_insert_with(|| f.scenario.clone());
        match f.report {
            CellReport::Compare(report) => comparisons.push((f.cell, *report)),
            CellReport::Compete(c) => competitions.push((f.cell, *c)),
        }
    }
    anyhow::ensure!(
        !(comparisons.is_empty() && competitions.is_empty()),
        "{}: no cell-*.json files (run `qbench sweep` first)",
        dir.display()
    );
    Ok(Sweep {
        scenario: scenario.unwrap_or_default(),
        comparisons,
        fdr: None,
        competitions,
    })
}

/// `--metric` and `--test`: every comparison judged anew from its runs.
fn rejudge(
    cells: &mut [(Cell, CompareReport)],
    metric: Option<Metric>,
    test: Option<Test>,
) -> anyhow::Result<()> {
    for (cell, r) in cells {
        let m = metric.unwrap_or(r.comparison.metric);
        m.check(r.a.config.spec.load.as_ref())
            .map_err(|message| ConfigError {
                flag: "--metric",
                message: format!("cell {}: {message}", cell.label()),
            })?;
        let t = test.unwrap_or(r.comparison.test);
        r.comparison = Comparison::of(&r.a.runs, &r.b.runs, m, t);
    }
    Ok(())
}

/// Benjamini-Hochberg over the cells' p-values at `level`.
fn control_fdr(cells: &[(Cell, CompareReport)], level: f64) -> Vec<Option<(f64, bool)>> {
    let p: Vec<Option<f64>> = cells.iter().map(|(_, r)| r.comparison.p).collect();
    discoveries(&p, level)
}

/// The first line of each SVG file beside `html`: which page it belongs to.
fn svg_mark(html: &Path) -> String {
    let name = html
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("<!-- {GENERATOR}: {} -->\n", name.replace("--", "- -"))
}

/// The SVG files of the page at `html` with their contents: heatmap `i` is
/// `<stem>.heatmap-<i>.svg` beside the page, scaling chart `i` `<stem>.scaling-<i>.svg`.
fn svg_files(html: &Path, page: &Page) -> Vec<(PathBuf, String)> {
    let stem = html
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mark = svg_mark(html);
    let named = |kind: &'static str, svgs: &[String]| -> Vec<(PathBuf, String)> {
        svgs.iter()
            .enumerate()
            .map(|(i, svg)| {
                (
                    beside(html).join(format!("{stem}.{kind}-{i}.svg")),
                    format!("{mark}{svg}"),
                )
            })
            .collect()
    };
    [
        named("heatmap", &page.heatmaps),
        named("scaling", &page.charts),
    ]
    .concat()
}

/// An SVG file may be written where nothing is, or over this page's own earlier one: a
/// regular file, not a link, that starts with this page's mark. Anything else there (another
/// page's file, the user's, a link, a device) is left alone and fails the report.
fn check_svg_dest(path: &Path, mark: &str) -> anyhow::Result<()> {
    let ours = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(html_error(format!("{}: {e}", path.display()))),
        Ok(m) => m.file_type().is_file() && starts_with_mark(path, mark.len() as u64, mark),
    };
    if ours {
        return Ok(());
    }
    Err(html_error(format!(
        "{} is in the way of the page's SVG file and was not written by this report; move it or name another page",
        path.display()
    )))
}

/// Every SVG file is checked before any is written; each replaces its old self atomically
/// (a fresh temporary file renamed onto the name, which follows no link), then the page.
fn write_page(html: &Path, page: &Page) -> anyhow::Result<()> {
    let dir = beside(html);
    std::fs::create_dir_all(dir).with_context(|| format!("--html: creating {}", dir.display()))?;
    let mark = svg_mark(html);
    let svgs = svg_files(html, page);
    for (path, _) in &svgs {
        check_svg_dest(path, &mark)?;
    }
    for (path, svg) in &svgs {
        qbench_engine::files::replace_atomically(path, svg.as_bytes())?;
    }
    write_text(html, &page.html)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(tag: &str) -> Page {
        Page {
            html: format!("<html>{tag}</html>"),
            heatmaps: vec![format!("<svg>{tag} 0</svg>"), format!("<svg>{tag} 1</svg>")],
            charts: vec![format!("<svg>{tag} scaling</svg>")],
        }
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    #[test]
    fn svg_files_are_named_after_the_page() {
        let names: Vec<PathBuf> = svg_files(Path::new("d/sweep.html"), &page("a"))
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            names,
            [
                "d/sweep.heatmap-0.svg",
                "d/sweep.heatmap-1.svg",
                "d/sweep.scaling-0.svg"
            ]
            .map(PathBuf::from)
        );
    }

    /// Two reports of one directory each keep their SVG files; a report written again
    /// replaces its own.
    #[test]
    fn a_second_report_keeps_the_first_reports_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.html"), dir.path().join("b.html"));
        write_page(&a, &page("first")).unwrap();
        write_page(&b, &page("second")).unwrap();
        let a0 = dir.path().join("a.heatmap-0.svg");
        assert!(read(&a0).ends_with("<svg>first 0</svg>"), "{}", read(&a0));
        assert!(read(&dir.path().join("b.heatmap-0.svg")).ends_with("<svg>second 0</svg>"));
        assert_eq!(read(&a), "<html>first</html>");
        write_page(&a, &page("again")).unwrap();
        assert!(read(&a0).ends_with("<svg>again 0</svg>"));
        assert_eq!(read(&a), "<html>again</html>");
    }

    /// A file of the user's, another page's file (report.htm and report.html share a stem)
    /// or a link where an SVG file goes fails the report before anything is written, and is
    /// left as it was.
    #[test]
    fn a_file_in_the_way_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let html = dir.path().join("r.html");
        let mine = dir.path().join("r.heatmap-1.svg");
        std::fs::write(&mine, "my drawing").unwrap();
        let err = format!("{:#}", write_page(&html, &page("x")).unwrap_err());
        assert!(
            err.starts_with("--html: ") && err.contains("r.heatmap-1.svg"),
            "{err}"
        );
        assert_eq!(read(&mine), "my drawing");
        assert!(!html.exists() && !dir.path().join("r.heatmap-0.svg").exists());

        std::fs::remove_file(&mine).unwrap();
        write_page(&dir.path().join("r.htm"), &page("other")).unwrap();
        let err = format!("{:#}", write_page(&html, &page("x")).unwrap_err());
        assert!(err.contains("r.heatmap-0.svg"), "{err}");
        assert!(read(&dir.path().join("r.heatmap-0.svg")).ends_with("<svg>other 0</svg>"));

        let other = tempfile::tempdir().unwrap();
        let html = other.path().join("r.html");
        let target = other.path().join("target");
        std::fs::write(&target, "kept").unwrap();
        std::os::unix::fs::symlink(&target, other.path().join("r.scaling-0.svg")).unwrap();
        assert!(write_page(&html, &page("x")).is_err());
        assert_eq!(read(&target), "kept");
    }

    #[test]
    fn missing_directories_are_created() {
        let dir = tempfile::tempdir().unwrap();
        let html = dir.path().join("new/deeper/r.html");
        check_page_dest(&html, false).unwrap();
        write_page(&html, &page("x")).unwrap();
        assert_eq!(read(&html), "<html>x</html>");
        assert!(dir.path().join("new/deeper/r.scaling-0.svg").is_file());
    }

    /// The page written where the user did not name one replaces an earlier report, not a
    /// file of the user's.
    #[test]
    fn the_default_page_replaces_only_a_report() {
        let dir = tempfile::tempdir().unwrap();
        let html = dir.path().join(DEFAULT_PAGE);
        check_page_dest(&html, true).unwrap();
        std::fs::write(&html, "<html>notes</html>").unwrap();
        let err = format!("{:#}", check_page_dest(&html, true).unwrap_err());
        assert!(
            err.starts_with("--html: ") && err.contains("not a page of"),
            "{err}"
        );
        check_page_dest(&html, false).unwrap();
        std::fs::write(
            &html,
            format!("<html><meta name=\"generator\" content=\"{GENERATOR}\">"),
        )
        .unwrap();
        check_page_dest(&html, true).unwrap();
    }
}
