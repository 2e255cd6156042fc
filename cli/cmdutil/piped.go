package cmdutil

import "strings"

// PipedHelp is the paragraph a read command's --help gives its piped
// output: on a terminal it prints an aligned table with a header and
// money as $1.23, but piped (stdout not a terminal) it prints one
// tab-separated line per row, no header, times as RFC 3339 and amounts
// as they would be summed. columns name the fields in order, with their
// unit where it differs from the table's (e.g. "balance (minor units,
// cents)").
func PipedHelp(columns ...string) string {
	return "\n\nPiped (stdout not a terminal), it prints tab-separated lines without a header, " +
		"one per row, with these columns: " + strings.Join(columns, ", ") +
		". Times are RFC 3339. --json gives the same data with field names."
}
