package auth

import (
	"strings"
	"testing"
)

func TestPageText(t *testing.T) {
	tests := []struct {
		name, page, want string
	}{
		{name: "plain text", page: "unknown client or redirect_uri\n", want: "unknown client or redirect_uri"},
		{name: "an IdP's HTML error page",
			page: `<!DOCTYPE html><html><head><title>dex</title><style>body { color: red; }</style></head>
<body><script>var x = "<p>not this</p>";</script><div class="theme-panel">
<h2 class="theme-heading">Bad Request</h2>
<p>Unregistered redirect_uri (&#34;http://127.0.0.1:41235/callback&#34;).</p></div></body></html>`,
			want: `Bad Request Unregistered redirect_uri ("http://127.0.0.1:41235/callback").`},
		{name: "long pages are cut on a rune boundary", page: strings.Repeat("é", 400),
			want: strings.Repeat("é", maxPageText/2) + "…"},
		{name: "empty", page: "<html><body> </body></html>", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pageText(tt.page); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
