package cmdutil

import "testing"

func renderTable(t *testing.T, tty, color bool) string {
	t.Helper()
	ios, _, out, _ := Test()
	ios.SetStdoutTTY(tty)
	ios.SetNoColor(!color)
	tp := NewTablePrinter(ios)
	tp.AddHeader("id", "state", "note")
	tp.AddRow("a-1", "active", "")
	tp.AddField("a-22")
	tp.AddField("failed", WithColor(ios.ColorScheme().Red))
	tp.AddField("has\ttab")
	tp.EndRow()
	if err := tp.Render(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestTablePrinter(t *testing.T) {
	tests := []struct {
		name       string
		tty, color bool
		want       string
	}{
		{"piped", false, false, "a-1\tactive\t\na-22\tfailed\thas tab\n"},
		{"tty", true, false, "ID    STATE   NOTE\na-1   active\na-22  failed  has tab\n"},
		{"tty colour", true, true, "\x1b[1mID\x1b[0m    \x1b[1mSTATE\x1b[0m   \x1b[1mNOTE\x1b[0m\n" +
			"a-1   active\n" +
			"a-22  \x1b[31mfailed\x1b[0m  has tab\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := renderTable(t, tt.tty, tt.color); got != tt.want {
				t.Errorf("got\n%q; want\n%q", got, tt.want)
			}
		})
	}
}

func TestColorEnabled(t *testing.T) {
	tests := []struct {
		name         string
		tty, noColor bool
		want         bool
	}{
		{"tty", true, false, true},
		{"tty NO_COLOR", true, true, false},
		{"piped", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := Test()
			ios.SetStdoutTTY(tt.tty)
			ios.SetNoColor(tt.noColor)
			if got := ios.ColorEnabled(); got != tt.want {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

func TestSystemHonoursNoColor(t *testing.T) {
	for _, tt := range []struct {
		value string
		color bool
	}{{"1", false}, {"anything", false}, {"", true}} {
		t.Setenv("NO_COLOR", tt.value)
		t.Setenv("TERM", "xterm-256color")
		ios := System()
		ios.SetStdoutTTY(true)
		if got := ios.ColorEnabled(); got != tt.color {
			t.Errorf("NO_COLOR=%q: colour %v; want %v (only a non-empty value turns it off)", tt.value, got, tt.color)
		}
	}
}
