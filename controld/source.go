package controld

// source is the network address the request's connection came from, as
// far as controld can tell; "" when it cannot (then only per-account
// login limits apply). The NATS auth callout will provide it.
func (c *call) source() string { return "" }
