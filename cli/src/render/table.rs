//! The one table renderer of the command line: the report's table, the
//! advice's two tables and the batch-size table are all made here.
//!
//! A table is columns of text cells. Each column is aligned to the right
//! (numbers) or to the left (names, notes, paths), as wide as its widest
//! cell or header, or as its minimum width when that is more (so that
//! columns of one kind line up across them), and set off from the column
//! before it by a gap of spaces (two unless said otherwise). No line ends
//! in a space. Widths count characters, not bytes; cells that quote input
//! are escaped by their maker ([`crate::format`]) before they get here.

/// Which side of its column a cell keeps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column: its header, its alignment, its minimum width and the gap
/// before it.
#[derive(Clone, Debug)]
pub struct Column {
    header: String,
    align: Align,
    min_width: usize,
    gap: usize,
}

impl Column {
    /// A right-aligned column headed `header`.
    pub fn right(header: impl Into<String>) -> Self {
        Self::new(header.into(), Align::Right)
    }

    /// A left-aligned column headed `header`.
    pub fn left(header: impl Into<String>) -> Self {
        Self::new(header.into(), Align::Left)
    }

    fn new(header: String, align: Align) -> Self {
        Self {
            header,
            align,
            min_width: 0,
            gap: 2,
        }
    }

    /// At least `width` characters wide.
    pub fn min_width(mut self, width: usize) -> Self {
        self.min_width = width;
        self
    }

    /// `gap` spaces before it (none before the first column).
    pub fn gap(mut self, gap: usize) -> Self {
        self.gap = gap;
        self
    }
}

/// Columns and rows of cells, rendered by [`Table::render`].
#[derive(Debug)]
pub struct Table {
    columns: Vec<Column>,
    header: bool,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table of these columns, whose headers make its first line.
    pub fn new(columns: Vec<Column>) -> Self {
        Self {
            columns,
            header: true,
            rows: Vec::new(),
        }
    }

    /// Without the header line (a list of names and values).
    pub fn without_header(mut self) -> Self {
        self.header = false;
        self
    }

    /// Adds a row. A row may have fewer cells than there are columns: the
    /// missing ones are empty.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert!(cells.len() <= self.columns.len(), "{cells:?}");
        self.rows.push(cells);
    }

    /// Appends the table to `out`, one line per row (after the header),
    /// each ending in a newline.
    pub fn render(&self, out: &mut String) {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|cell| cell.chars().count())
                    .chain(self.header.then(|| c.header.chars().count()))
                    .fold(c.min_width, usize::max)
            })
            .collect();
        let header: Vec<String> = self.columns.iter().map(|c| c.header.clone()).collect();
        let lines = self.header.then_some(&header).into_iter().chain(&self.rows);
        for cells in lines {
            let start = out.len();
            for (i, (column, width)) in self.columns.iter().zip(&widths).enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = width - cell.chars().count();
                if i > 0 {
                    push_spaces(out, column.gap);
                }
                match column.align {
                    Align::Right => {
                        push_spaces(out, pad);
                        out.push_str(cell);
                    }
                    Align::Left => {
                        out.push_str(cell);
                        push_spaces(out, pad);
                    }
                }
            }
            let end = start + out[start..].trim_end_matches(' ').len();
            out.truncate(end);
            out.push('\n');
        }
    }
}

fn push_spaces(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(v: &[&str]) -> Vec<String> {
        v.iter().map(|&s| s.to_owned()).collect()
    }

    #[test]
    fn columns_align_pad_and_never_end_a_line_in_a_space() {
        let mut t = Table::new(vec![
            Column::right(""),
            Column::right("k"),
            Column::right("steps").gap(1),
            Column::left("notes"),
        ]);
        t.row(cells(&["*", "10", "1,234", "prior"]));
        t.row(cells(&["", "2", "5", ""]));
        t.row(cells(&["", "3"]));
        let mut out = String::new();
        t.render(&mut out);
        let expected = [
            "    k steps  notes",
            "*  10 1,234  prior",
            "    2     5",
            "    3",
        ];
        assert_eq!(out, expected.map(|l| l.to_owned() + "\n").concat());
    }

    #[test]
    fn minimum_widths_and_no_header() {
        let mut t = Table::new(vec![
            Column::left("").min_width(14),
            Column::right("").gap(0).min_width(6),
        ])
        .without_header();
        t.row(cells(&["name", "1"]));
        t.row(cells(&["longer name", "2.50"]));
        let mut out = String::new();
        t.render(&mut out);
        let expected = format!(
            "name{}1\nlonger name{}2.50\n",
            " ".repeat(15),
            " ".repeat(5)
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut t = Table::new(vec![Column::right("é"), Column::left("x")]);
        t.row(cells(&["ééé", "a"]));
        t.row(cells(&["e", "b"]));
        let mut out = String::new();
        t.render(&mut out);
        assert_eq!(out, "  é  x\nééé  a\n  e  b\n");
    }
}
