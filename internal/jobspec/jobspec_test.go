package jobspec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Spec
	}{
		{
			name: "minimal on an allocation",
			in:   "resources: {allocation: a-1}\nrun: exit 7\n",
			want: Spec{Resources: Resources{Allocation: "a-1"}, Run: "exit 7", Release: ReleaseOnExit},
		},
		{
			name: "sku defaults to one GPU",
			in:   "resources:\n  sku: h100\nrun: echo hello\n",
			want: Spec{Resources: Resources{SKU: "h100", GPUs: 1}, Run: "echo hello", Release: ReleaseOnExit},
		},
		{
			name: "every key",
			in: `name: train-1
resources:
  sku: h100
  gpus: 2
image: debian
workdir: ./src
env:
  VERBOSE: 1
  TOKEN: secret:hf-token
  A_B: "x y"
setup: |
  pip install -r requirements.txt
run: |
  python3 train.py
timeout: 2h30m
retries: 3
release: on-success
`,
			want: Spec{Name: "train-1", Resources: Resources{SKU: "h100", GPUs: 2}, Image: "debian", Workdir: "./src",
				Env:   []EnvVar{{Name: "A_B", Value: "x y"}, {Name: "TOKEN", Secret: "hf-token"}, {Name: "VERBOSE", Value: "1"}},
				Setup: "pip install -r requirements.txt\n", Run: "python3 train.py\n",
				Timeout: 150 * time.Minute, Retries: 3, Release: ReleaseOnSuccess},
		},
		{
			name: "keep",
			in:   "resources: {allocation: a-1}\nrun: x\nrelease: keep\n",
			want: Spec{Resources: Resources{Allocation: "a-1"}, Run: "x", Release: ReleaseKeep},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	long := strings.Repeat("x", MaxScriptBytes+1)
	tests := []struct {
		name      string
		in        string
		wantField string
		wantLine  int
		wantText  string
	}{
		{"unknown key", "resources: {allocation: a}\nrun: x\nrn: y\n", "rn", 3, `unknown key in job.yaml (did you mean "run"?)`},
		{"unknown resources key", "resources:\n  sku: h\n  gpu: 2\nrun: x\n", "resources.gpu", 3, `did you mean "gpus"?`},
		{"missing run", "resources: {allocation: a}\n", "run", 0, "required"},
		{"blank run", "resources: {allocation: a}\nrun: '  '\n", "run", 2, "required"},
		{"empty file", "", "run", 0, "required"},
		{"comments only", "# nothing\n", "run", 0, "required"},
		{"no resources", "run: x\n", "resources", 0, "required: sku"},
		{"allocation and sku", "resources: {allocation: a, sku: h}\nrun: x\n", "resources.allocation", 1, "leave sku and gpus out"},
		{"negative gpus", "resources: {sku: h, gpus: -1}\nrun: x\n", "resources.gpus", 1, "at least 1"},
		{"gpus not a number", "resources: {sku: h, gpus: two}\nrun: x\n", "resources.gpus", 1, "whole number"},
		{"bad release", "resources: {allocation: a}\nrun: x\nrelease: never\n", "release", 3, "on-exit, keep or on-success"},
		{"bad timeout", "resources: {allocation: a}\nrun: x\ntimeout: 10\n", "timeout", 3, "positive duration"},
		{"negative timeout", "resources: {allocation: a}\nrun: x\ntimeout: -1m\n", "timeout", 3, "positive duration"},
		{"huge timeout", "resources: {allocation: a}\nrun: x\ntimeout: 10000h\n", "timeout", 3, "at most"},
		{"retries too many", "resources: {allocation: a}\nrun: x\nretries: 11\n", "retries", 3, "0 to 10"},
		{"key twice", "resources: {allocation: a}\nrun: x\nrun: y\n", "run", 3, "twice"},
		{"run a list", "resources: {allocation: a}\nrun: [a, b]\n", "run", 2, "want text, got a list"},
		{"top level a list", "- run\n", "", 1, "want a mapping"},
		{"bad env name", "resources: {allocation: a}\nrun: x\nenv: {1X: y}\n", "env.1X", 3, "not a variable name"},
		{"env a list", "resources: {allocation: a}\nrun: x\nenv: [A]\n", "env", 3, "want a mapping"},
		{"empty secret", "resources: {allocation: a}\nrun: x\nenv: {A: 'secret:'}\n", "env.A", 3, "names no secret"},
		{"bad secret name", "resources: {allocation: a}\nrun: x\nenv: {A: 'secret:Bad Name'}\n", "env.A", 3, "not a secret name"},
		{"bad name", "name: Has Spaces\nresources: {allocation: a}\nrun: x\n", "name", 1, "a name is"},
		{"run too long", "resources: {allocation: a}\nrun: " + long + "\n", "run", 2, "at most"},
		{"two documents", "run: x\n---\nrun: y\n", "", 2, "second YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v; want an *Error", err)
			}
			if e.Field != tt.wantField || e.Line != tt.wantLine || !strings.Contains(e.Reason, tt.wantText) {
				t.Errorf("got field %q line %d %q; want field %q line %d containing %q", e.Field, e.Line, e.Reason, tt.wantField, tt.wantLine, tt.wantText)
			}
			if tt.wantField != "" && !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("message %q does not name the field %q", err, tt.wantField)
			}
		})
	}
}

func TestParseRefusesHugeFile(t *testing.T) {
	_, err := Parse(make([]byte, MaxFileBytes+1))
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("got %v; want a size error", err)
	}
}

func TestSecretNames(t *testing.T) {
	s, err := Parse([]byte("resources: {allocation: a}\nrun: x\nenv: {B: 'secret:b', A: v, C: 'secret:c'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.SecretNames(), []string{"b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
}
