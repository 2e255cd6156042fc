package workdir

import "testing"

func TestIgnoredFollowsGitignoreRules(t *testing.T) {
	type probe struct {
		rel   string
		isDir bool
		want  bool
	}
	tests := []struct {
		name   string
		files  map[string]string // directory → ignore file content, added root first
		order  []string
		probes []probe
	}{
		{
			name:  "unanchored name matches at any depth",
			files: map[string]string{"": "*.log\nbuild\n"},
			probes: []probe{
				{"a.log", false, true}, {"x/y/b.log", false, true}, {"a.txt", false, false},
				{"build", true, true}, {"src/build", true, true}, {"src/build", false, true},
			},
		},
		{
			name:  "anchored patterns match from their file's directory only",
			files: map[string]string{"": "/top.txt\ndoc/frotz\n"},
			probes: []probe{
				{"top.txt", false, true}, {"sub/top.txt", false, false},
				{"doc/frotz", false, true}, {"a/doc/frotz", false, false},
			},
		},
		{
			name:  "trailing slash matches directories only",
			files: map[string]string{"": "data/\n"},
			probes: []probe{
				{"data", true, true}, {"data", false, false}, {"sub/data", true, true},
			},
		},
		{
			name:  "negation re-includes; the last matching rule wins",
			files: map[string]string{"": "*.bin\n!keep.bin\n"},
			probes: []probe{
				{"big.bin", false, true}, {"keep.bin", false, false}, {"d/keep.bin", false, false},
			},
		},
		{
			name:  "a nested file's rules apply below it and come after its parents'",
			files: map[string]string{"": "*.tmp\n", "sub": "!important.tmp\nlocal.txt\n"},
			order: []string{"", "sub"},
			probes: []probe{
				{"sub/important.tmp", false, false}, {"important.tmp", false, true},
				{"sub/local.txt", false, true}, {"local.txt", false, false}, {"subx/local.txt", false, false},
				{"sub/deeper/local.txt", false, true},
			},
		},
		{
			name:  "double stars",
			files: map[string]string{"": "**/logs\nout/**\na/**/z\n"},
			probes: []probe{
				{"logs", true, true}, {"x/logs", true, true},
				{"out", true, false}, {"out/f", false, true}, {"out/d/f", false, true},
				{"a/z", false, true}, {"a/b/c/z", false, true}, {"b/a/z", false, false},
			},
		},
		{
			name:  "comments, blank lines, escapes, classes and trailing spaces",
			files: map[string]string{"": "# comment\n\n\\#hash\n\\!bang\nf[0-9].txt\ng[!a].txt\nspaced   \n"},
			probes: []probe{
				{"# comment", false, false}, {"#hash", false, true}, {"!bang", false, true},
				{"f1.txt", false, true}, {"fa.txt", false, false},
				{"gb.txt", false, true}, {"ga.txt", false, false}, {"spaced", false, true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Matcher
			order := tt.order
			if order == nil {
				order = []string{""}
			}
			for _, dir := range order {
				m.Add(dir, []byte(tt.files[dir]))
			}
			for _, p := range tt.probes {
				if got := m.Ignored(p.rel, p.isDir); got != p.want {
					t.Errorf("Ignored(%q, dir=%v) = %v; want %v", p.rel, p.isDir, got, p.want)
				}
			}
		})
	}
}
