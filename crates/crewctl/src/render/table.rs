//! Table construction shared by every view: one look, width-aware, colour only when allowed.

use super::View;
use crate::style::Tone;
use comfy_table::{Attribute, Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table};

/// No borders; a rule under the header.
const PRESET: &str = "     ──            ";

pub fn new(view: &View, headers: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(PRESET);
    // comfy-table would otherwise probe the terminal itself; width and colour are decided by
    // the caller so that piped output and tests are deterministic.
    t.force_no_tty();
    if view.paint.on {
        t.enforce_styling();
        t.style_text_only();
    }
    match view.width {
        Some(w) => {
            t.set_content_arrangement(ContentArrangement::Dynamic);
            t.set_width(w);
        }
        None => {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    let header: Vec<Cell> = headers
        .iter()
        .map(|h| {
            let c = Cell::new(h);
            if view.paint.on {
                c.add_attribute(Attribute::Bold)
            } else {
                c
            }
        })
        .collect();
    t.set_header(header);
    t
}

/// A cell coloured with `tone` when colour is on.
pub fn toned(view: &View, tone: Tone, text: impl ToString) -> Cell {
    let c = Cell::new(text);
    if !view.paint.on {
        return c;
    }
    match tone.table_color() {
        Some(color) => c.fg(color),
        None => c.add_attribute(Attribute::Bold),
    }
}

/// Right-aligns the given columns (numbers).
pub fn align_right(t: &mut Table, columns: &[usize]) {
    for &i in columns {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Columns that must not wrap (ids, numbers, times); the others absorb a narrow terminal.
pub fn keep_whole(t: &mut Table, columns: &[usize]) {
    for &i in columns {
        if let Some(col) = t.column_mut(i) {
            col.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
}

/// Leaves columns out (less important ones on narrow terminals).
pub fn hide(t: &mut Table, columns: &[usize]) {
    for &i in columns {
        if let Some(col) = t.column_mut(i) {
            col.set_constraint(ColumnConstraint::Hidden);
        }
    }
}

/// The rendered table with trailing spaces trimmed from each line (comfy-table pads cells).
pub fn finish(t: &Table) -> String {
    let mut out = String::new();
    for line in t.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
