package hosts

import "strings"

// enrollTokenPrefix starts every enrollment token.
const enrollTokenPrefix = "gpe_"

// IsEnrollToken reports whether token has the form of an enrollment token
// (not whether it is valid: enrollment checks that).
func IsEnrollToken(token string) bool { return strings.HasPrefix(token, enrollTokenPrefix) }
