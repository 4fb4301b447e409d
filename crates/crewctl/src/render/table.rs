//! Tables that fit the terminal: one line per row, never a cell wrapped letter by letter.
//!
//! Each view declares its columns once (`Col`): how a column may give way when the terminal is
//! narrow (cut with `…` down to a minimum, or dropped, least useful first) and how it aligns.
//! Adding a column is one more `Col` and one more cell per row. Widths are measured on the text
//! before it is painted and padding is added outside the colour codes, so colour never moves a
//! column.

use super::units::cut;
use super::View;
use crate::style::Tone;
use unicode_width::UnicodeWidthStr;

const GAP: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column: its header and how it behaves when space runs short.
#[derive(Debug, Clone)]
pub struct Col {
    pub header: String,
    pub align: Align,
    /// `Some(min)`: may be cut down to `min` characters. `None`: shown whole or not at all.
    pub cut_to: Option<usize>,
    /// `Some(rank)`: may be left out; lower ranks go first. `None`: always shown.
    pub drop_rank: Option<u8>,
}

impl Col {
    /// A column shown whole and never dropped (ids, statuses).
    pub fn new(header: impl Into<String>) -> Col {
        Col {
            header: header.into(),
            align: Align::Left,
            cut_to: None,
            drop_rank: None,
        }
    }

    pub fn right(mut self) -> Col {
        self.align = Align::Right;
        self
    }

    /// May be cut down to `min` characters (free text: goals, notes, descriptions).
    pub fn cut(mut self, min: usize) -> Col {
        self.cut_to = Some(min);
        self
    }

    /// May be left out on a narrow terminal; lower ranks are left out first.
    pub fn drop(mut self, rank: u8) -> Col {
        self.drop_rank = Some(rank);
        self
    }
}

/// One cell: plain text and the tone to paint it in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    pub text: String,
    pub tone: Option<Tone>,
}

impl Cell {
    pub fn new(text: impl ToString) -> Cell {
        Cell {
            text: flat(&text.to_string()),
            tone: None,
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::new(s)
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::new(s)
    }
}

/// A cell painted with `tone` when colour is on.
pub fn toned(_view: &View, tone: Tone, text: impl ToString) -> Cell {
    Cell {
        text: flat(&text.to_string()),
        tone: Some(tone),
    }
}

/// Cells are one line: line breaks and tabs become spaces.
/// A cell's text on one line, escaped as it will reach the terminal (`safe::term`), so its
/// width is measured on what is shown: an escaped control or bidi character is six columns
/// wide, where it was counted as none and pushed the rest of its row out of line.
fn flat(s: &str) -> String {
    let s = crate::safe::term(s);
    if !s.contains(['\n', '\r', '\t']) {
        return s.into_owned();
    }
    s.chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

pub fn width_of(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

#[derive(Debug, Clone)]
pub struct Table {
    cols: Vec<Col>,
    rows: Vec<Vec<Cell>>,
}

/// The decided widths: `None` for a column left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub widths: Vec<Option<usize>>,
}

impl Layout {
    /// Whether column `col` is shown.
    #[cfg(test)]
    pub fn shows(&self, col: usize) -> bool {
        matches!(self.widths.get(col), Some(Some(_)))
    }
}

impl Table {
    pub fn new(cols: Vec<Col>) -> Table {
        Table { cols, rows: vec![] }
    }

    /// Adds a row; missing cells are empty, extra cells are ignored.
    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    fn natural(&self) -> Vec<usize> {
        self.cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|cell| width_of(&cell.text))
                    .chain(std::iter::once(width_of(&c.header)))
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Widths for `max` columns of terminal (`None`: unbounded, every column whole). Free text
    /// is cut to its minimum first, then columns are left out by rank, then the space won back
    /// goes to the cut columns again, most useful first.
    pub fn layout(&self, max: Option<usize>) -> Layout {
        let natural = self.natural();
        let mut widths: Vec<Option<usize>> = natural.iter().map(|w| Some(*w)).collect();
        let Some(max) = max else {
            return Layout { widths };
        };
        let total = |w: &[Option<usize>]| -> usize {
            let shown: Vec<usize> = w.iter().flatten().copied().collect();
            shown.iter().sum::<usize>() + GAP * shown.len().saturating_sub(1)
        };
        // Least useful first: by drop rank, never-dropped columns last, then right to left.
        let mut order: Vec<usize> = (0..self.cols.len()).collect();
        order.sort_by_key(|&i| {
            let c = &self.cols[i];
            (
                c.drop_rank.map_or(u16::MAX, u16::from),
                std::cmp::Reverse(i),
            )
        });
        for &i in &order {
            let over = total(&widths).saturating_sub(max);
            if over == 0 {
                break;
            }
            if let (Some(min), Some(w)) = (self.cols[i].cut_to, widths[i]) {
                widths[i] = Some(w.saturating_sub(over).max(min.min(w)));
            }
        }
        for &i in &order {
            if total(&widths) <= max {
                break;
            }
            if self.cols[i].drop_rank.is_some() {
                widths[i] = None;
            }
        }
        // Give back what leaving columns out freed, to the most useful cut columns first.
        for &i in order.iter().rev() {
            let spare = max.saturating_sub(total(&widths));
            if spare == 0 {
                break;
            }
            if let Some(w) = widths[i] {
                widths[i] = Some(w.saturating_add(spare).min(natural[i]));
            }
        }
        // Still too wide (only whole columns left): cut free text further, to a few characters.
        for &i in &order {
            let over = total(&widths).saturating_sub(max);
            if over == 0 {
                break;
            }
            if let (Some(_), Some(w)) = (self.cols[i].cut_to, widths[i]) {
                widths[i] = Some(w.saturating_sub(over).max(3.min(w)));
            }
        }
        Layout { widths }
    }

    /// The table for `view`'s width; trailing spaces trimmed.
    pub fn render(&self, view: &View) -> String {
        let layout = self.layout(view.width.map(usize::from));
        self.render_with(view, &layout)
    }

    pub fn render_with(&self, view: &View, layout: &Layout) -> String {
        let mut out = String::new();
        let header: Vec<Cell> = self
            .cols
            .iter()
            .map(|c| Cell {
                text: c.header.clone(),
                tone: Some(Tone::Bold),
            })
            .collect();
        self.line(view, layout, &header, &mut out);
        let shown: Vec<usize> = layout.widths.iter().flatten().copied().collect();
        let rule = shown.iter().sum::<usize>() + GAP * shown.len().saturating_sub(1);
        out.push_str(&"─".repeat(rule));
        out.push('\n');
        for r in &self.rows {
            self.line(view, layout, r, &mut out);
        }
        out
    }

    fn line(&self, view: &View, layout: &Layout, cells: &[Cell], out: &mut String) {
        let mut line = String::new();
        let mut first = true;
        for (i, col) in self.cols.iter().enumerate() {
            let Some(Some(w)) = layout.widths.get(i).copied() else {
                continue;
            };
            if !first {
                line.push_str(&" ".repeat(GAP));
            }
            first = false;
            let empty = Cell::default();
            let cell = cells.get(i).unwrap_or(&empty);
            let text = fit(&cell.text, w);
            let pad = " ".repeat(w.saturating_sub(width_of(&text)));
            let painted = match cell.tone {
                Some(t) => view.p(t, &text),
                None => text,
            };
            match col.align {
                Align::Left => {
                    line.push_str(&painted);
                    line.push_str(&pad);
                }
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(&painted);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// `s` cut to `w` columns of display width, ending with `…` when cut.
fn fit(s: &str, w: usize) -> String {
    if width_of(s) <= w {
        return s.to_string();
    }
    // `cut` counts characters; wide characters take two columns, so cut further until it fits.
    let mut n = w;
    loop {
        let c = cut(s, n);
        if width_of(&c) <= w || n == 0 {
            return c;
        }
        n -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::view;
    use crate::style::Paint;

    fn sample() -> Table {
        let mut t = Table::new(vec![
            Col::new("id"),
            Col::new("status"),
            Col::new("team").cut(6).drop(2),
            Col::new("goal").cut(10),
            Col::new("cost").right().drop(1),
        ]);
        t.row(vec![
            "a1b2c3d4".into(),
            "● running".into(),
            "default".into(),
            "write a migration guide for the new configuration format".into(),
            "$0.0132".into(),
        ]);
        t.row(vec![
            "ffee0011".into(),
            "✓ completed".into(),
            "review".into(),
            "explore".into(),
            "$1.23".into(),
        ]);
        t
    }

    #[test]
    fn every_line_fits_and_free_text_gives_way_first() {
        let t = sample();
        for w in [20u16, 40, 50, 60, 80, 120] {
            let out = t.render(&view(w));
            for line in out.lines() {
                assert!(
                    width_of(line) <= usize::from(w).max(31),
                    "width {w}: {line:?}\n{out}"
                );
            }
        }
        // Wide: nothing cut.
        let wide = t.render(&view(120));
        assert!(wide.contains("configuration format") && wide.contains("$0.0132"));
        // Narrower: the goal is cut before anything is left out.
        let mid = t.render(&view(80));
        assert!(
            mid.contains('…') && mid.contains("cost") && mid.contains("team"),
            "{mid}"
        );
        // Narrow: cost (rank 1) goes before team (rank 2); id and status stay whole.
        let l = t.layout(Some(44));
        assert!(!l.shows(4) && l.shows(2), "{l:?}");
        let narrow = t.render(&view(44));
        assert!(
            narrow.contains("a1b2c3d4") && narrow.contains("● running"),
            "{narrow}"
        );
    }

    #[test]
    fn colour_does_not_move_columns() {
        let mut t = Table::new(vec![Col::new("a"), Col::new("b")]);
        let v = view(80);
        t.row(vec![toned(&v, Tone::Bad, "red"), "x".into()]);
        t.row(vec!["plain-longer".into(), "y".into()]);
        let mut coloured = v;
        coloured.paint = Paint::new(true);
        let strip = |s: &str| {
            let mut out = String::new();
            let mut esc = false;
            for c in s.chars() {
                match (esc, c) {
                    (false, '\u{1b}') => esc = true,
                    (true, 'm') => esc = false,
                    (true, _) => {}
                    (false, c) => out.push(c),
                }
            }
            out
        };
        assert_eq!(strip(&t.render(&coloured)), t.render(&v));
    }

    /// A cell holding a control or bidi character is measured as it is shown (escaped): the
    /// columns after it stay in line with the header.
    #[test]
    fn escaped_cells_keep_their_columns() {
        let mut t = Table::new(vec![Col::new("name"), Col::new("next")]);
        t.row(vec![Cell::new("plain"), Cell::new("x")]);
        t.row(vec![Cell::new("bidi \u{202e} evil"), Cell::new("y")]);
        t.row(vec![Cell::new("\u{1b}]0;TITLE\u{7}"), Cell::new("z")]);
        let out = t.render(&view(120));
        let col_of = |needle: &str| {
            out.lines()
                .find_map(|l| l.rfind(needle).map(|i| width_of(&l[..i])))
                .unwrap_or_else(|| panic!("no {needle} in {out}"))
        };
        let next = col_of("next");
        for v in ["x", "y", "z"] {
            assert_eq!(col_of(&format!(" {v}")) + 1, next, "{out}");
        }
        assert!(!out.contains('\u{1b}'), "{out}");
    }

    #[test]
    fn wide_characters_are_measured_by_display_width() {
        assert_eq!(fit("日本語のテキスト", 7), "日本語…");
        assert_eq!(width_of(&fit("日本語のテキスト", 7)), 7);
        assert_eq!(fit("short", 10), "short");
    }
}
