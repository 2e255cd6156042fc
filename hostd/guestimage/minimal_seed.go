package guestimage

// seedYAMLAwk flattens the block YAML of a NoCloud seed file into one
// "path<TAB>value" line per scalar, e.g. "users.0.ssh_authorized_keys.1
// <TAB>ssh-ed25519 AAAA... renter". The minimal guest has no Python and
// no YAML library; busybox awk runs this. It reads what cloud-init's
// seeds use and hostd writes (block mappings and sequences, compact or
// indented, plain and quoted scalars, flow sequences of scalars, comments)
// and not anchors, tags or multi-line scalars (a block scalar's lines are
// skipped).
const seedYAMLAwk = `# seedyaml.awk: flatten seed YAML into "path<TAB>value" lines.
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function join(a, b) { return a == "" ? b : a "." b }
function unquote(s,   out, i, c, n) {
	s = trim(s)
	if (s ~ /^".*"$/) {
		s = substr(s, 2, length(s) - 2); out = ""; n = length(s)
		for (i = 1; i <= n; i++) {
			c = substr(s, i, 1)
			if (c == "\\" && i < n) {
				i++; c = substr(s, i, 1)
				if (c == "n") c = "\n"; else if (c == "t") c = "\t"
			}
			out = out c
		}
		return out
	}
	if (s ~ /^'.*'$/) { s = substr(s, 2, length(s) - 2); gsub(/''/, "'", s); return s }
	# A plain scalar ends at a comment.
	sub(/[ \t]+#.*$/, "", s)
	return s
}
function emit(p, v) { print p "\t" v }
# flow emits the items of a flow sequence "[a, b]".
function flow(p, v,   n, i, items) {
	v = trim(v); v = substr(v, 2, length(v) - 2)
	if (trim(v) == "") return
	n = split(v, items, ",")
	for (i = 1; i <= n; i++) emit(join(p, i - 1), unquote(items[i]))
}
# keyval handles "key: value" at column col in the mapping on top.
function keyval(col, rest,   key, val, i, p) {
	if (rest ~ /^"/) {
		i = index(substr(rest, 2), "\"") + 1
		key = substr(rest, 2, i - 2); rest = substr(rest, i + 1)
	} else if (rest ~ /^'/) {
		i = index(substr(rest, 2), "'") + 1
		key = substr(rest, 2, i - 2); rest = substr(rest, i + 1)
	} else {
		i = index(rest, ": ")
		if (i == 0 && rest ~ /:$/) i = length(rest)
		if (i == 0) { emit(pth[depth], unquote(rest)); return }
		key = substr(rest, 1, i - 1); rest = substr(rest, i)
	}
	sub(/^[ \t]*:/, "", rest)
	val = trim(rest)
	p = join(pth[depth], trim(key))
	if (val == "" || val ~ /^#/) { pending = 1; pkey = 1; pcol = col; ppath = p; return }
	if (val ~ /^[|>]/) { block = col; return }
	if (val ~ /^\[.*\]$/) { flow(p, val); return }
	if (val ~ /^\{ *\}$/) return
	emit(p, unquote(val))
}
function push(col, p, kind) { depth++; ind[depth] = col; pth[depth] = p; typ[depth] = kind; cnt[depth] = 0 }
BEGIN { depth = 0; ind[0] = 0; pth[0] = ""; typ[0] = "map"; pending = 0; block = -1 }
{
	line = $0; sub(/\r$/, "", line)
	if (line ~ /^[ \t]*(#.*)?$/ || line ~ /^(---|\.\.\.)/) next
	match(line, /^ */); col = RLENGTH; rest = substr(line, col + 1)
	if (block >= 0) { if (col > block) next; block = -1 }
	if (pending) {
		pending = 0
		if (col > pcol || (pkey && col == pcol && rest ~ /^-( |$)/)) {
			push(col, ppath, rest ~ /^-( |$)/ ? "seq" : "map")
		} else emit(ppath, "")
	}
	while (depth > 0 && ind[depth] > col) depth--
	if (depth > 0 && typ[depth] == "seq" && ind[depth] == col && rest !~ /^-( |$)/) depth--
	while (rest ~ /^-( |$)/) {
		p = join(pth[depth], cnt[depth]++)
		rest = substr(rest, 2); match(rest, /^ */); col += 1 + RLENGTH; rest = substr(rest, RLENGTH + 1)
		if (rest == "" || rest ~ /^#/) { pending = 1; pkey = 0; pcol = col - 1; ppath = p; next }
		if (rest ~ /^-( |$)/) { push(col, p, "seq"); continue }
		if (rest ~ /^("[^"]*"|'[^']*'|[^"'\[{][^:]*):( |$)/) { push(col, p, "map"); keyval(col, rest); next }
		if (rest ~ /^\[.*\]$/) { flow(p, rest); next }
		emit(p, unquote(rest)); next
	}
	keyval(col, rest)
}
END { if (pending) emit(ppath, "") }
`
