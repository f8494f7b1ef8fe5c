//! Charts of saved runs as hand-written SVG: requests per second per scenario
//! (horizontal bars, one per run, each labelled with its number) and latency per
//! scenario (p50 and p99 per run on a log scale). `issuing-bench --charts DIR` draws the
//! run that just finished; `issuing-bench charts` draws one or more runs saved with
//! `--json` side by side and prints their table (docs/benchmarks.md).

use crate::saved::{self, fmt_ms, fmt_rate, thousands, SavedRun};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, Clone)]
pub struct ChartsArgs {
    /// Runs saved with `issuing-bench --json FILE`, drawn side by side in this order.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Where the SVG files go.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// The files' names: <out>/<name>-rps.svg and <out>/<name>-latency.svg. By default
    /// the runs' backend (`sqlite`, `postgres`), or `compare` when they differ.
    #[arg(long)]
    pub name: Option<String>,
    /// Requests per second on a log scale (by default linear, from zero).
    #[arg(long)]
    pub log_rps: bool,
}

/// `issuing-bench charts`: draws the saved runs and prints their table in Markdown.
pub fn run(args: ChartsArgs) -> anyhow::Result<bool> {
    let runs = args
        .runs
        .iter()
        .map(|p| SavedRun::read(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let name = args.name.clone().unwrap_or_else(|| default_name(&runs));
    write(&args.out, &name, &runs, args.log_rps)?;
    print!("{}", saved::markdown_table(&runs));
    Ok(true)
}

/// The runs' backend when they share one, else `compare`.
pub fn default_name(runs: &[SavedRun]) -> String {
    match runs.first() {
        Some(first) if runs.iter().all(|r| r.backend == first.backend) => first.backend.clone(),
        _ => "compare".to_owned(),
    }
}

/// Writes `<dir>/<name>-rps.svg` and `<dir>/<name>-latency.svg`; a chart none of the
/// runs has numbers for is not written.
pub fn write(dir: &Path, name: &str, runs: &[SavedRun], log_rps: bool) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let charts = [
        ("rps", rps_svg(runs, log_rps)),
        ("latency", latency_svg(runs)),
    ];
    for (what, svg) in charts {
        let path = dir.join(format!("{name}-{what}.svg"));
        match svg {
            Some(svg) => {
                std::fs::write(&path, svg)?;
                eprintln!("issuing-bench: wrote {}", path.display());
            }
            None => eprintln!(
                "issuing-bench: no {what} numbers in these runs; {} not written",
                path.display()
            ),
        }
    }
    Ok(())
}

const WIDTH: f64 = 960.0;
const PAD: f64 = 16.0;
const BAR: f64 = 14.0;
const BAR_GAP: f64 = 3.0;
const GROUP_PAD: f64 = 6.0;
/// Okabe and Ito's palette, told apart by colour-blind readers too.
const COLOURS: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
];
/// Roughly the width of a character of the 12 px sans-serif the charts use.
const CHAR: f64 = 6.8;

fn colour(series: usize) -> &'static str {
    COLOURS[series % COLOURS.len()]
}

/// Requests per second per scenario: a group per scenario, a bar per run that has it.
pub fn rps_svg(runs: &[SavedRun], log: bool) -> Option<String> {
    let value = |run: &SavedRun, key: &str| {
        saved::row(run, key)
            .and_then(|r| r.per_second)
            .filter(|v| v.is_finite() && (*v > 0.0 || !log && *v >= 0.0))
    };
    let groups = groups(runs, |run, key| value(run, key).is_some());
    let values: Vec<f64> = groups
        .iter()
        .flat_map(|key| runs.iter().filter_map(|run| value(run, key)))
        .collect();
    let max = values.iter().copied().fold(f64::NAN, f64::max);
    let min = values.iter().copied().fold(f64::NAN, f64::min);
    if values.is_empty() {
        return None;
    }
    let labels: Vec<String> = values.iter().map(|v| fmt_rate(*v)).collect();
    let mut chart = Frame::new(
        &format!("Requests per second by scenario: {}", backends(runs)),
        runs,
        false,
        &groups,
        longest(&labels),
    );
    let axis = if log {
        Axis::log(min, max, chart.left, chart.right)
    } else {
        Axis::linear(max, chart.left, chart.right)
    };
    chart.grid(
        &axis,
        if log {
            "requests per second (log scale)"
        } else {
            "requests per second"
        },
    );
    for (g, key) in groups.iter().enumerate() {
        for (s, run) in runs.iter().enumerate() {
            let Some(v) = value(run, key) else { continue };
            let y = chart.bar_top(g, s);
            let w = (axis.x(v) - axis.x0).max(1.0);
            let text = fmt_rate(v);
            let _ = write!(
                chart.body,
                r#"<rect class="bar" x="{:.1}" y="{y:.1}" width="{w:.1}" height="{BAR}" fill="{}"><title>{}</title></rect>"#,
                axis.x0,
                colour(s),
                escape(&format!("{key}, {}: {text} req/s", run.label())),
            );
            let _ = writeln!(
                chart.body,
                r#"<text class="value" x="{:.1}" y="{:.1}">{}</text>"#,
                axis.x0 + w + 4.0,
                y + BAR - 3.0,
                escape(&text)
            );
        }
    }
    Some(chart.finish())
}

/// p50 and p99 per scenario: per run a line from p50 (a filled dot) to p99 (an open
/// one), milliseconds on a log scale, labelled with both numbers. A zero (a webhook
/// that arrived with its answer) is in the label but has no place on the scale.
pub fn latency_svg(runs: &[SavedRun]) -> Option<String> {
    let known = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0);
    let values = |run: &SavedRun, key: &str| {
        saved::row(run, key)
            .map(|r| (known(r.p50_ms), known(r.p99_ms)))
            .filter(|(a, b)| a.is_some() || b.is_some())
    };
    let plotted = |v: Option<f64>| v.filter(|v| *v > 0.0);
    let groups = groups(runs, |run, key| values(run, key).is_some());
    let mut all = Vec::new();
    let mut labels = Vec::new();
    for key in &groups {
        for run in runs {
            if let Some((p50, p99)) = values(run, key) {
                all.extend(plotted(p50).into_iter().chain(plotted(p99)));
                labels.push(latency_label(p50, p99));
            }
        }
    }
    if all.is_empty() {
        return None;
    }
    let max = all.iter().copied().fold(f64::NAN, f64::max);
    let min = all.iter().copied().fold(f64::NAN, f64::min);
    let mut chart = Frame::new(
        &format!("Latency by scenario, p50 and p99: {}", backends(runs)),
        runs,
        true,
        &groups,
        longest(&labels),
    );
    let axis = Axis::log(min, max, chart.left, chart.right);
    chart.grid(&axis, "milliseconds (log scale)");
    for (g, key) in groups.iter().enumerate() {
        for (s, run) in runs.iter().enumerate() {
            let Some((p50, p99)) = values(run, key) else {
                continue;
            };
            let y = chart.bar_top(g, s) + BAR / 2.0;
            let c = colour(s);
            let text = latency_label(p50, p99);
            let _ = write!(
                chart.body,
                r#"<g class="latency"><title>{}</title>"#,
                escape(&format!("{key}, {}: {text}", run.label()))
            );
            let (p50, p99) = (plotted(p50), plotted(p99));
            if let (Some(a), Some(b)) = (p50, p99) {
                let _ = write!(
                    chart.body,
                    r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{c}" stroke-width="2"/>"#,
                    axis.x(a),
                    axis.x(b)
                );
            }
            if let Some(a) = p50 {
                let _ = write!(
                    chart.body,
                    r#"<circle class="p50" cx="{:.1}" cy="{y:.1}" r="4.5" fill="{c}"/>"#,
                    axis.x(a)
                );
            }
            if let Some(b) = p99 {
                let _ = write!(
                    chart.body,
                    r##"<circle class="p99" cx="{:.1}" cy="{y:.1}" r="4.5" fill="#fff" stroke="{c}" stroke-width="2"/>"##,
                    axis.x(b)
                );
            }
            let end = p50
                .into_iter()
                .chain(p99)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            let _ = writeln!(
                chart.body,
                r#"<text class="value" x="{:.1}" y="{:.1}">{}</text></g>"#,
                end.map_or(axis.x0, |v| axis.x(v)) + 9.0,
                y + 4.0,
                escape(&text)
            );
        }
    }
    Some(chart.finish())
}

fn latency_label(p50: Option<f64>, p99: Option<f64>) -> String {
    match (p50, p99) {
        (Some(a), Some(b)) => format!("p50 {}, p99 {} ms", fmt_ms(a), fmt_ms(b)),
        (Some(a), None) => format!("p50 {} ms", fmt_ms(a)),
        (None, Some(b)) => format!("p99 {} ms", fmt_ms(b)),
        (None, None) => String::new(),
    }
}

/// The scenarios, in order, that at least one run has a number for.
fn groups(runs: &[SavedRun], has: impl Fn(&SavedRun, &str) -> bool) -> Vec<String> {
    saved::scenario_keys(runs)
        .into_iter()
        .filter(|key| runs.iter().any(|run| has(run, key)))
        .collect()
}

fn backends(runs: &[SavedRun]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for run in runs {
        if !names.contains(&run.backend_name()) {
            names.push(run.backend_name());
        }
    }
    names.join(" and ")
}

fn longest(labels: &[String]) -> usize {
    labels.iter().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// A value axis, left to right.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
    x0: f64,
    x1: f64,
}

impl Axis {
    /// From zero to a round number at or above `max`.
    fn linear(max: f64, x0: f64, x1: f64) -> Axis {
        let max = if max > 0.0 { max } else { 1.0 };
        let step = nice_step(max / 5.0);
        Axis {
            log: false,
            lo: 0.0,
            hi: (max / step).ceil() * step,
            x0,
            x1,
        }
    }

    /// From the power of ten at or below `min` to the one at or above `max`.
    fn log(min: f64, max: f64, x0: f64, x1: f64) -> Axis {
        let lo = 10f64.powi(min.log10().floor() as i32);
        let hi = 10f64.powi(max.log10().ceil() as i32).max(lo * 10.0);
        Axis {
            log: true,
            lo,
            hi,
            x0,
            x1,
        }
    }

    fn x(&self, v: f64) -> f64 {
        let t = if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.x0 + t.clamp(0.0, 1.0) * (self.x1 - self.x0)
    }

    /// Labelled ticks, and unlabelled ones (2× and 5× each power of ten on a log scale).
    fn ticks(&self) -> (Vec<f64>, Vec<f64>) {
        if self.log {
            let (a, b) = (
                self.lo.log10().round() as i32,
                self.hi.log10().round() as i32,
            );
            let major: Vec<f64> = (a..=b).map(|e| 10f64.powi(e)).collect();
            let minor = (a..b)
                .flat_map(|e| [2.0, 5.0].map(|m| m * 10f64.powi(e)))
                .collect();
            (major, minor)
        } else {
            let step = nice_step(self.hi / 5.0);
            let n = (self.hi / step).round() as usize;
            ((0..=n).map(|i| i as f64 * step).collect(), Vec::new())
        }
    }
}

/// The round step (1, 2, 2.5 or 5 times a power of ten) at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powi(raw.log10().floor() as i32);
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag)
}

fn tick_label(v: f64) -> String {
    if v >= 1.0 {
        thousands(v, if v.fract() == 0.0 { 0 } else { 1 })
    } else {
        // 0.1, 0.01, 0.25…: six decimals at most, trailing zeros dropped.
        let text = format!("{v:.6}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A chart's frame: title, legend, scenario labels and their bands, the value axis.
struct Frame {
    head: String,
    body: String,
    left: f64,
    right: f64,
    plot_top: f64,
    plot_bottom: f64,
    series: usize,
}

impl Frame {
    fn new(
        title: &str,
        runs: &[SavedRun],
        percentiles: bool,
        groups: &[String],
        value_chars: usize,
    ) -> Frame {
        let label_chars = groups.iter().map(|g| g.chars().count()).max().unwrap_or(0);
        let left = PAD + (label_chars as f64 * CHAR).clamp(80.0, 340.0) + 12.0;
        let right = WIDTH - PAD - (value_chars as f64 * CHAR + 16.0).clamp(40.0, 260.0);
        let mut head = String::new();
        let mut y = 30.0;
        let _ = writeln!(
            head,
            r#"<text x="{PAD}" y="{y}" font-size="16" font-weight="bold">{}</text>"#,
            escape(title)
        );
        for (s, run) in runs.iter().enumerate() {
            y += 19.0;
            let text = run.legend();
            let _ = writeln!(
                head,
                r#"<rect x="{PAD}" y="{:.1}" width="12" height="12" fill="{}"/><text class="legend" x="{}" y="{y:.1}">{}</text>"#,
                y - 10.5,
                colour(s),
                PAD + 18.0,
                escape(&text)
            );
        }
        if percentiles {
            // The markers as the plot draws them, in grey.
            y += 19.0;
            let cy = y - 4.5;
            let _ = writeln!(
                head,
                r##"<circle cx="{:.1}" cy="{cy:.1}" r="4.5" fill="#666"/><text class="legend" x="{:.1}" y="{y:.1}">p50</text><circle cx="{:.1}" cy="{cy:.1}" r="4.5" fill="#fff" stroke="#666" stroke-width="2"/><text class="legend" x="{:.1}" y="{y:.1}">p99, joined by a line per run; milliseconds on a log scale</text>"##,
                PAD + 6.0,
                PAD + 16.0,
                PAD + 56.0,
                PAD + 66.0,
            );
        }
        let plot_top = y + 16.0;
        let series = runs.len().max(1);
        let mut frame = Frame {
            head,
            body: String::new(),
            left,
            right,
            plot_top,
            plot_bottom: plot_top,
            series,
        };
        frame.plot_bottom = frame.group_top(groups.len());
        for (g, key) in groups.iter().enumerate() {
            let top = frame.group_top(g);
            let height = frame.group_top(g + 1) - top;
            if g % 2 == 0 {
                let _ = writeln!(
                    frame.head,
                    r##"<rect x="{PAD}" y="{top:.1}" width="{:.1}" height="{height:.1}" fill="#f3f5f7"/>"##,
                    WIDTH - 2.0 * PAD
                );
            }
            let _ = writeln!(
                frame.head,
                r#"<text class="scenario" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                left - 10.0,
                top + height / 2.0 + 4.0,
                escape(key)
            );
        }
        frame
    }

    fn group_top(&self, g: usize) -> f64 {
        let band = self.series as f64 * (BAR + BAR_GAP) - BAR_GAP + 2.0 * GROUP_PAD;
        self.plot_top + g as f64 * band
    }

    fn bar_top(&self, g: usize, s: usize) -> f64 {
        self.group_top(g) + GROUP_PAD + s as f64 * (BAR + BAR_GAP)
    }

    /// Grid lines, the axis' ticks and its title.
    fn grid(&mut self, axis: &Axis, title: &str) {
        let (major, minor) = axis.ticks();
        let (top, bottom) = (self.plot_top, self.plot_bottom);
        // A log axis of a decade or two labels its 2× and 5× ticks too.
        let label_minor = major.len() <= 3;
        for v in minor {
            let x = axis.x(v);
            let _ = writeln!(
                self.head,
                r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#e4e7eb" stroke-dasharray="2 3"/>"##
            );
            if label_minor {
                let _ = writeln!(
                    self.head,
                    r##"<text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#777">{}</text>"##,
                    bottom + 16.0,
                    escape(&tick_label(v))
                );
            }
        }
        for v in major {
            let x = axis.x(v);
            let _ = writeln!(
                self.head,
                r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#c9ced4"/><text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                bottom + 16.0,
                escape(&tick_label(v))
            );
        }
        let _ = writeln!(
            self.head,
            r##"<line x1="{:.1}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="#555"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
            axis.x0,
            axis.x1,
            (axis.x0 + axis.x1) / 2.0,
            bottom + 36.0,
            escape(title)
        );
    }

    fn finish(self) -> String {
        let height = (self.plot_bottom + 52.0).ceil();
        let mut s = String::new();
        let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
        let _ = writeln!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="12" fill="#222">"##
        );
        let _ = writeln!(
            s,
            r##"<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
        );
        s.push_str(&self.head);
        s.push_str(&self.body);
        s.push_str("</svg>\n");
        s
    }
}

/// Text and attribute values as XML wants them.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::saved::SavedRow;

    /// Checks that `svg` is well-formed XML (one root, every tag closed in order, quoted
    /// attributes, no bare `<` or `&`) and returns its elements' start tags in order.
    fn well_formed(svg: &str) -> Vec<String> {
        let mut open: Vec<String> = Vec::new();
        let mut tags = Vec::new();
        let mut roots = 0;
        let mut rest = svg;
        if let Some(r) = rest.strip_prefix("<?xml") {
            rest = &r[r.find("?>").expect("unterminated declaration") + 2..];
        }
        while let Some(i) = rest.find('<') {
            check_text(&rest[..i]);
            if !rest[..i].trim().is_empty() {
                assert!(!open.is_empty(), "text outside the root: {:?}", &rest[..i]);
            }
            rest = &rest[i..];
            let end = tag_end(rest);
            let tag = &rest[1..end];
            rest = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(
                    open.pop().as_deref(),
                    Some(name.trim()),
                    "mismatched </{name}>"
                );
                continue;
            }
            let self_closing = tag.ends_with('/');
            let tag = tag.trim_end_matches('/');
            let name: String = tag.chars().take_while(|c| !c.is_whitespace()).collect();
            assert!(
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                "bad element name in <{tag}>"
            );
            check_attributes(&tag[name.len()..]);
            if open.is_empty() {
                roots += 1;
            }
            tags.push(tag.to_owned());
            if !self_closing {
                open.push(name);
            }
        }
        check_text(rest);
        assert!(rest.trim().is_empty(), "text after the root");
        assert!(open.is_empty(), "unclosed: {open:?}");
        assert_eq!(roots, 1, "one root element");
        tags
    }

    /// Where the tag starting at `s[0] == '<'` ends, quotes respected.
    fn tag_end(s: &str) -> usize {
        let mut quote = None;
        for (i, c) in s.char_indices().skip(1) {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, '>') => return i,
                (None, '<') => panic!("'<' inside a tag: {s:.60}"),
                _ => {}
            }
        }
        panic!("unterminated tag: {s:.60}")
    }

    fn check_attributes(mut s: &str) {
        loop {
            s = s.trim_start();
            if s.is_empty() {
                return;
            }
            let eq = s.find('=').expect("attribute without a value");
            let name = s[..eq].trim();
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':'),
                "bad attribute name {name:?}"
            );
            let value = s[eq + 1..].trim_start();
            let q = value.chars().next().expect("empty attribute");
            assert!(q == '"' || q == '\'', "unquoted attribute {name}");
            let close = value[1..].find(q).expect("unclosed attribute") + 1;
            check_text(&value[1..close]);
            s = &value[close + 1..];
        }
    }

    fn check_text(s: &str) {
        assert!(!s.contains('<'), "bare '<' in {s:?}");
        let mut rest = s;
        while let Some(i) = rest.find('&') {
            rest = &rest[i + 1..];
            let semi = rest.find(';').expect("'&' without ';'");
            assert!(
                ["amp", "lt", "gt", "quot", "apos"].contains(&&rest[..semi]),
                "unknown entity &{};",
                &rest[..semi]
            );
        }
    }

    fn attr(tag: &str, name: &str) -> f64 {
        let key = format!(" {name}=\"");
        let start = tag.find(&key).expect("attribute") + key.len();
        let len = tag[start..].find('"').expect("closed");
        tag[start..start + len].parse().expect("a number")
    }

    fn texts(svg: &str, class: &str) -> Vec<String> {
        let key = format!("<text class=\"{class}\"");
        svg.match_indices(&key)
            .map(|(i, _)| {
                let s = &svg[i..];
                let start = s.find('>').expect("tag end") + 1;
                s[start..start + s[start..].find('<').expect("text end")].to_owned()
            })
            .collect()
    }

    fn row(name: &str, rate: Option<f64>, p50: Option<f64>, p99: Option<f64>) -> SavedRow {
        SavedRow {
            scenario: name.into(),
            per_second: rate,
            p50_ms: p50,
            p99_ms: p99,
            ..SavedRow::default()
        }
    }

    fn run(backend: &str, label: &str, rows: Vec<SavedRow>) -> SavedRun {
        SavedRun {
            backend: backend.into(),
            label: Some(label.into()),
            date: Some("2026-11-28".into()),
            commit: Some("58931df".into()),
            scale: Some(1.0),
            concurrency: Some(32),
            rows,
            ..SavedRun::default()
        }
    }

    #[test]
    fn one_bar_per_row_with_its_number_and_a_length_in_proportion() {
        let runs = [run(
            "sqlite",
            "run 1",
            vec![
                row("health", Some(61046.0), Some(0.5), Some(1.5)),
                row("cards/topup", Some(7756.4), None, Some(10.4)),
                // No rate: no bar and no group.
                row("console: overview", None, None, Some(78.8)),
                row("auth@1", Some(402.0), Some(2.4), Some(4.1)),
            ],
        )];
        let svg = rps_svg(&runs, false).unwrap();
        let tags = well_formed(&svg);
        let bars: Vec<&String> = tags
            .iter()
            .filter(|t| t.contains("class=\"bar\""))
            .collect();
        assert_eq!(bars.len(), 3);
        assert_eq!(texts(&svg, "value"), ["61,046", "7,756", "402"]);
        assert_eq!(texts(&svg, "scenario"), ["health", "cards/topup", "auth@1"]);
        // Linear from zero: the bars' widths are in the proportions of their values.
        let widths: Vec<f64> = bars.iter().map(|t| attr(t, "width")).collect();
        for (w, v) in widths.iter().zip([61_046.0, 7_756.4, 402.0]) {
            assert!((w - widths[0] * v / 61_046.0).abs() < 0.2, "{w} for {v}");
        }
        assert!(widths[0] > 500.0, "the longest bar spans most of the plot");
        assert!(svg.contains("SQLite, scale 1, 32 in flight, 2026-11-28, commit 58931df"));
    }

    #[test]
    fn runs_side_by_side_get_a_bar_each_in_their_own_colour() {
        let runs = [
            run(
                "sqlite",
                "SQLite",
                vec![
                    row("health", Some(61046.0), None, None),
                    row("cards/topup", Some(7756.0), None, None),
                ],
            ),
            run(
                "postgres",
                "PostgreSQL",
                vec![row("cards/topup", Some(3186.0), None, None)],
            ),
        ];
        let svg = rps_svg(&runs, true).unwrap();
        let tags = well_formed(&svg);
        let fills: Vec<String> = tags
            .iter()
            .filter(|t| t.contains("class=\"bar\""))
            .map(|t| t.split("fill=\"").nth(1).unwrap()[..7].to_owned())
            .collect();
        assert_eq!(fills, [COLOURS[0], COLOURS[0], COLOURS[1]]);
        assert_eq!(texts(&svg, "value"), ["61,046", "7,756", "3,186"]);
        assert!(svg.contains("SQLite and PostgreSQL"));
        assert!(svg.contains("(log scale)"));
    }

    #[test]
    fn latency_has_a_dot_per_percentile_on_a_log_scale() {
        let runs = [run(
            "postgres",
            "run 2",
            vec![
                row("health", Some(59399.0), Some(0.5), Some(5.0)),
                row("cards/topup", Some(3896.0), None, Some(12.6)),
                row("users/create", Some(9453.0), None, None),
                row("webhooks", Some(2153.0), Some(0.0), Some(0.8)),
            ],
        )];
        let svg = latency_svg(&runs).unwrap();
        let tags = well_formed(&svg);
        let dots = |class: &str| -> Vec<f64> {
            tags.iter()
                .filter(|t| t.contains(&format!("class=\"{class}\"")))
                .map(|t| attr(t, "cx"))
                .collect()
        };
        let (p50, p99) = (dots("p50"), dots("p99"));
        assert_eq!((p50.len(), p99.len()), (1, 3));
        assert_eq!(
            texts(&svg, "value"),
            ["p50 0.5, p99 5 ms", "p99 12.6 ms", "p50 0, p99 0.8 ms"]
        );
        // Log scale: 0.5 → 5 ms is a decade, 5 → 12.6 ms log10(2.52) of one.
        let decade = p99[0] - p50[0];
        assert!(decade > 100.0);
        assert!(((p99[1] - p99[0]) / decade - 2.52f64.log10()).abs() < 0.002);
        assert!(texts(&svg, "scenario").iter().all(|s| s != "users/create"));
    }

    #[test]
    fn names_are_escaped() {
        let runs = [run(
            "sqlite",
            "a \"quoted\" <run> & more",
            vec![row("x<y & 'z'", Some(10.0), Some(1.0), Some(2.0))],
        )];
        for svg in [rps_svg(&runs, false).unwrap(), latency_svg(&runs).unwrap()] {
            well_formed(&svg);
            assert!(svg.contains("x&lt;y &amp; &apos;z&apos;"));
            assert!(svg.contains("a &quot;quoted&quot; &lt;run&gt; &amp; more"));
        }
    }

    #[test]
    fn no_numbers_no_chart() {
        let runs = [run("sqlite", "r", vec![row("health", None, None, None)])];
        assert!(rps_svg(&runs, false).is_none());
        assert!(latency_svg(&runs).is_none());
        assert_eq!(default_name(&runs), "sqlite");
    }

    #[test]
    fn the_runs_saved_in_the_docs_read_back_and_draw() {
        for text in [
            include_str!("../../../docs/bench/sqlite-run1.json"),
            include_str!("../../../docs/bench/sqlite-run2.json"),
            include_str!("../../../docs/bench/postgres-run1.json"),
            include_str!("../../../docs/bench/postgres-run2.json"),
        ] {
            let run: SavedRun = serde_json::from_str(text).unwrap();
            let rates = run.rows.iter().filter(|r| r.per_second.is_some()).count();
            let svg = rps_svg(std::slice::from_ref(&run), false).unwrap();
            let bars = well_formed(&svg)
                .iter()
                .filter(|t| t.contains("class=\"bar\""))
                .count();
            assert_eq!((rates, bars), (8, 8));
            well_formed(&latency_svg(&[run]).unwrap());
        }
    }

    #[test]
    fn axes_end_on_round_numbers() {
        let a = Axis::linear(61_046.0, 0.0, 100.0);
        assert_eq!((a.lo, a.hi), (0.0, 80_000.0));
        assert_eq!(a.ticks().0, [0.0, 20_000.0, 40_000.0, 60_000.0, 80_000.0]);
        let a = Axis::linear(7_756.0, 0.0, 100.0);
        assert_eq!(a.hi, 8_000.0);
        let l = Axis::log(0.47, 78.8, 0.0, 300.0);
        assert_eq!((l.lo, l.hi), (0.1, 100.0));
        assert_eq!(
            l.ticks()
                .0
                .iter()
                .map(|v| tick_label(*v))
                .collect::<Vec<_>>(),
            ["0.1", "1", "10", "100"]
        );
        assert!((l.x(1.0) - 100.0).abs() < 1e-9);
    }
}
