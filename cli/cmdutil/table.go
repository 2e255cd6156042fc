package cmdutil

import (
	"io"
	"strings"
	"unicode/utf8"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TablePrinter prints rows. On a terminal: aligned columns under an
// upper-case header, bold when colour is on. Piped: tab-separated values,
// no header, no colour, one row per line.
type TablePrinter struct {
	out    io.Writer
	tty    bool
	cs     ColorScheme
	header []string
	rows   [][]field
	row    []field
}

type field struct {
	text  string
	color func(string) string
}

// FieldOption adjusts one field.
type FieldOption func(*field)

// WithColor colours a field on a terminal (applied after alignment).
func WithColor(fn func(string) string) FieldOption { return func(f *field) { f.color = fn } }

// NewTablePrinter prints to ios.Out.
func NewTablePrinter(ios *IOStreams) *TablePrinter {
	return &TablePrinter{out: ios.Out, tty: ios.IsStdoutTTY(), cs: ios.ColorScheme()}
}

// AddHeader sets the column names, shown on a terminal only.
func (t *TablePrinter) AddHeader(columns ...string) {
	t.header = make([]string, len(columns))
	for i, c := range columns {
		t.header[i] = strings.ToUpper(c)
	}
}

// AddField appends a field to the current row.
func (t *TablePrinter) AddField(text string, opts ...FieldOption) {
	f := field{text: sanitize(text)}
	for _, o := range opts {
		o(&f)
	}
	t.row = append(t.row, f)
}

// EndRow finishes the current row.
func (t *TablePrinter) EndRow() {
	t.rows = append(t.rows, t.row)
	t.row = nil
}

// AddRow adds a whole row of plain fields.
func (t *TablePrinter) AddRow(fields ...string) {
	for _, f := range fields {
		t.AddField(f)
	}
	t.EndRow()
}

// Len is the number of finished rows.
func (t *TablePrinter) Len() int { return len(t.rows) }

// Render writes the table.
func (t *TablePrinter) Render() error {
	if t.row != nil {
		t.EndRow()
	}
	var b strings.Builder
	if !t.tty {
		for _, r := range t.rows {
			for i, f := range r {
				if i > 0 {
					b.WriteByte('\t')
				}
				b.WriteString(f.text)
			}
			b.WriteByte('\n')
		}
		_, err := io.WriteString(t.out, b.String())
		return err
	}
	rows := t.rows
	if len(t.header) > 0 {
		hdr := make([]field, len(t.header))
		for i, h := range t.header {
			hdr[i] = field{text: h, color: t.cs.Bold}
		}
		rows = append([][]field{hdr}, rows...)
	}
	var widths []int
	for _, r := range rows {
		for i, f := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(f.text))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, f := range r {
			text := f.text
			if i < len(r)-1 {
				text += strings.Repeat(" ", widths[i]-utf8.RuneCountInString(text))
			}
			if f.color != nil {
				// Colour the text, not the padding, so it stays aligned.
				text = f.color(f.text) + text[len(f.text):]
			}
			if i > 0 {
				line.WriteString("  ")
			}
			line.WriteString(text)
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.out, b.String())
	return err
}

// sanitize keeps a field on one line and out of the TSV separators, and
// makes any other control character or bidirectional override visible
// (api.SanitizeText) rather than sending it to the terminal: fields are
// often other people's text (reasons, names, memos).
func sanitize(s string) string {
	return api.SanitizeText(strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return ' '
		}
		return r
	}, s))
}
