//! The Prometheus text exposition format (version 0.0.4), written by hand: a family's
//! `# HELP` and `# TYPE` lines, then one line per sample.

use std::fmt::Write;

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Default)]
pub struct Text {
    out: String,
}

impl Text {
    /// Starts a family: `kind` is `counter`, `gauge` or `histogram`.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample: `name{label="value",…} value`.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Value) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                escape_label(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        value.write(&mut self.out);
        self.out.push('\n');
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn escape_label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A sample value: integers as they are, floats in plain decimal notation.
pub trait Value {
    fn write(&self, out: &mut String);
}

impl Value for u64 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl Value for i64 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl Value for u32 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl Value for f64 {
    fn write(&self, out: &mut String) {
        if self.is_nan() {
            out.push_str("NaN");
        } else if self.is_infinite() {
            out.push_str(if *self > 0.0 { "+Inf" } else { "-Inf" });
        } else {
            let _ = write!(out, "{self}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_families_and_escapes_labels() {
        let mut t = Text::default();
        t.family("x_total", "counter", "Things\\counted\nhere.");
        t.sample("x_total", &[("a", "q\"u\\o\nte"), ("b", "2")], 3u64);
        t.sample("x_total", &[], 1.5f64);
        t.sample("x_total", &[], f64::INFINITY);
        assert_eq!(
            t.finish(),
            "# HELP x_total Things\\\\counted\\nhere.\n# TYPE x_total counter\n\
             x_total{a=\"q\\\"u\\\\o\\nte\",b=\"2\"} 3\nx_total 1.5\nx_total +Inf\n"
        );
    }
}
