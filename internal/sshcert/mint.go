package sshcert

import (
	"crypto/rsa"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

const (
	// ClockSkew is how far before `now` user and host certificates start to
	// be valid, so a client or server whose clock is a little behind
	// controld's accepts a certificate minted a moment ago.
	ClockSkew = time.Minute
	// TicketSkew is the same allowance for tickets. hostd and controld run on
	// NTP-synchronised servers, and a ticket's whole window should stay short.
	TicketSkew = 30 * time.Second
	// DefaultTicketTTL is a ticket's lifetime when Ticket.TTL is zero: long
	// enough for sshgate to dial hostd, too short to be worth stealing.
	DefaultTicketTTL = time.Minute
	// MaxTicketTTL is the longest ticket SignTicket mints and VerifyTicket
	// accepts (plus TicketSkew).
	MaxTicketTTL = 5 * time.Minute
)

// Critical options of a ticket. hostd serves the session only for the node,
// allocation and POSIX user they name; OpenSSH refuses certificates with
// critical options it does not know, so a ticket is useless anywhere else.
const (
	OptionNode       = "gpuaas-node"
	OptionAllocation = "gpuaas-allocation"
	OptionPosixUser  = "gpuaas-posix-user"
	// OptionWorkload, optional, names the workload whose container every
	// session of the ticket runs in (docs/apps.md, "ssh into a workload").
	OptionWorkload = "gpuaas-workload"
)

// Extensions granted to user certificates and tickets, as OpenSSH names
// them. sshgate and hostd enforce them (x/crypto does not): a PTY, port
// forwarding both ways (`ssh -L`, direct-tcpip; `ssh -R`, tcpip-forward)
// and agent forwarding (`ssh -A`) are part of the product. Forwarding
// happens only when the client asks for it, as with OpenSSH: the agent is
// exposed on the allocation (to its user and root) only by `ssh -A`. X11
// and ~/.ssh/rc are not supported by the gateway.
const (
	ExtensionPermitPTY             = "permit-pty"
	ExtensionPermitPortForwarding  = "permit-port-forwarding"
	ExtensionPermitAgentForwarding = "permit-agent-forwarding"
)

func standardExtensions() map[string]string {
	return map[string]string{ExtensionPermitPTY: "", ExtensionPermitPortForwarding: "", ExtensionPermitAgentForwarding: ""}
}

// ExtensionSessionID carries the id of the gpuaas login session a user
// certificate was minted under, so the gateway can refuse (and cut off) a
// certificate whose session was logged out, disabled or has expired. It is
// an extension, not a critical option: OpenSSH servers ignore extensions
// they do not know but refuse certificates with unknown critical options,
// and the certificate must stay usable wherever it was before. Nothing
// grants anything by its presence; it only names what to check.
const ExtensionSessionID = "session-id@gpuaas"

// UserCert is what a user certificate is minted for.
type UserCert struct {
	// UserID is the certificate's one principal.
	UserID string
	// KeyID is recorded as the certificate's key id (the user's email), for logs.
	KeyID string
	// ValidBefore is the end of validity (the session's end). Zero means
	// now+MaxTTL.
	ValidBefore time.Time
	// MaxTTL, when set, caps validity at now+MaxTTL (the configured TTL).
	MaxTTL time.Duration
	// SessionID, when set, is the login session the certificate belongs
	// to, carried in ExtensionSessionID.
	SessionID string
}

// SignUser mints a user certificate for pub: principal UserID, key id KeyID,
// valid from now-ClockSkew until min(ValidBefore, now+MaxTTL) (never later
// than asked for, rounded down to the second), the standard extensions, no
// critical options and a random serial. A SessionID is added as the
// ExtensionSessionID extension.
func (a *Authority) SignUser(pub ssh.PublicKey, req UserCert, now time.Time) (*ssh.Certificate, error) {
	if err := checkSubjectKey(pub); err != nil {
		return nil, fmt.Errorf("sign user certificate for %q: %w", req.UserID, err)
	}
	if !validName(req.UserID) {
		return nil, fmt.Errorf("sign user certificate for %q: %w: user id is not a valid principal", req.UserID, ErrInvalidRequest)
	}
	if req.MaxTTL < 0 {
		return nil, fmt.Errorf("sign user certificate for %s: %w: negative max TTL", req.UserID, ErrInvalidRequest)
	}
	before := req.ValidBefore
	if req.MaxTTL > 0 && (before.IsZero() || now.Add(req.MaxTTL).Before(before)) {
		before = now.Add(req.MaxTTL)
	}
	if before.IsZero() {
		return nil, fmt.Errorf("sign user certificate for %s: %w: neither ValidBefore nor MaxTTL set", req.UserID, ErrInvalidRequest)
	}
	if req.SessionID != "" && !validName(req.SessionID) {
		return nil, fmt.Errorf("sign user certificate for %s: %w: session id %q", req.UserID, ErrInvalidRequest, req.SessionID)
	}
	ext := standardExtensions()
	if req.SessionID != "" {
		ext[ExtensionSessionID] = req.SessionID
	}
	cert := &ssh.Certificate{
		Key:             pub,
		CertType:        ssh.UserCert,
		KeyId:           req.KeyID,
		ValidPrincipals: []string{req.UserID},
		Permissions:     ssh.Permissions{Extensions: ext},
	}
	if err := a.sign(cert, now.Add(-ClockSkew), before, now); err != nil {
		return nil, fmt.Errorf("sign user certificate for %s: %w", req.UserID, err)
	}
	return cert, nil
}

// SignHost mints a host certificate for pub (the gateway's or hostd's host
// key) naming principals (the host names clients dial), valid from
// now-ClockSkew for validity.
func (a *Authority) SignHost(pub ssh.PublicKey, principals []string, validity time.Duration, now time.Time) (*ssh.Certificate, error) {
	if err := checkSubjectKey(pub); err != nil {
		return nil, fmt.Errorf("sign host certificate for %v: %w", principals, err)
	}
	if len(principals) == 0 {
		return nil, fmt.Errorf("sign host certificate: %w: no principals", ErrInvalidRequest)
	}
	for _, p := range principals {
		if !validName(p) {
			return nil, fmt.Errorf("sign host certificate for %q: %w: not a host name", p, ErrInvalidRequest)
		}
	}
	if validity <= 0 {
		return nil, fmt.Errorf("sign host certificate for %v: %w: validity must be positive", principals, ErrInvalidRequest)
	}
	cert := &ssh.Certificate{
		Key:             pub,
		CertType:        ssh.HostCert,
		KeyId:           "host " + strings.Join(principals, ","),
		ValidPrincipals: append([]string(nil), principals...),
	}
	if err := a.sign(cert, now.Add(-ClockSkew), now.Add(validity), now); err != nil {
		return nil, fmt.Errorf("sign host certificate for %v: %w", principals, err)
	}
	return cert, nil
}

// Ticket is a one-hop grant for the gateway→hostd connection: the holder of
// the ticket's key may open a session on Node, for Allocation, as PosixUser.
type Ticket struct {
	Node       string `json:"node"`
	Allocation string `json:"allocation"`
	PosixUser  string `json:"posix_user"`
	// Workload, when set, is the workload (on that allocation) whose
	// container the sessions run in (OptionWorkload).
	Workload string `json:"workload,omitempty"`
	// KeyID is recorded as the key id, for hostd's logs (say, the user id and
	// the gateway session). Empty means "ticket <allocation>@<node>".
	KeyID string `json:"key_id"`
	// TTL is the lifetime; zero means DefaultTicketTTL, at most
	// MaxTicketTTL. Only SignTicket reads it; VerifyTicket leaves it zero.
	TTL time.Duration `json:"-"`

	// Set by VerifyTicket, ignored by SignTicket. hostd refuses a serial it
	// has already served until ValidBefore (replay).
	Serial      uint64    `json:"serial"`
	ValidAfter  time.Time `json:"valid_after"`
	ValidBefore time.Time `json:"valid_before"`
}

// SignTicket mints a ticket: a user certificate for pub whose one principal
// is the POSIX user and whose critical options name the node, the allocation
// and the POSIX user, valid from now-TicketSkew to now+TTL.
func (a *Authority) SignTicket(pub ssh.PublicKey, t Ticket, now time.Time) (*ssh.Certificate, error) {
	if err := checkSubjectKey(pub); err != nil {
		return nil, fmt.Errorf("sign ticket for %s: %w", t.Allocation, err)
	}
	if !validName(t.Node) || !validName(t.Allocation) || !validName(t.PosixUser) {
		return nil, fmt.Errorf("sign ticket %+v: %w: node, allocation and POSIX user are required", t, ErrInvalidRequest)
	}
	if t.Workload != "" && !validName(t.Workload) {
		return nil, fmt.Errorf("sign ticket %+v: %w: bad workload", t, ErrInvalidRequest)
	}
	ttl := t.TTL
	if ttl == 0 {
		ttl = DefaultTicketTTL
	}
	if ttl < 0 || ttl > MaxTicketTTL {
		return nil, fmt.Errorf("sign ticket for %s: %w: TTL %s not in (0, %s]", t.Allocation, ErrInvalidRequest, ttl, MaxTicketTTL)
	}
	keyID := t.KeyID
	if keyID == "" {
		keyID = "ticket " + t.Allocation + "@" + t.Node
	}
	cert := &ssh.Certificate{
		Key:             pub,
		CertType:        ssh.UserCert,
		KeyId:           keyID,
		ValidPrincipals: []string{t.PosixUser},
		Permissions: ssh.Permissions{
			CriticalOptions: map[string]string{
				OptionNode:       t.Node,
				OptionAllocation: t.Allocation,
				OptionPosixUser:  t.PosixUser,
			},
			Extensions: standardExtensions(),
		},
	}
	if t.Workload != "" {
		cert.CriticalOptions[OptionWorkload] = t.Workload
	}
	if err := a.sign(cert, now.Add(-TicketSkew), now.Add(ttl), now); err != nil {
		return nil, fmt.Errorf("sign ticket for %s: %w", t.Allocation, err)
	}
	return cert, nil
}

// sign sets the window (whole seconds: after rounded down, before rounded
// down so it is never later than asked), a random serial, and signs.
func (a *Authority) sign(cert *ssh.Certificate, after, before, now time.Time) error {
	// Compared in whole seconds: a certificate must not be born expired.
	if before.Unix() <= now.Unix() {
		return fmt.Errorf("%w: valid-before %s is not after now (%s)", ErrInvalidRequest,
			before.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if after.Unix() < 0 || before.Unix() <= after.Unix() {
		return fmt.Errorf("%w: empty validity window", ErrInvalidRequest)
	}
	cert.ValidAfter = uint64(after.Unix())
	cert.ValidBefore = uint64(before.Unix())
	serial, err := randomSerial(a.rand)
	if err != nil {
		return err
	}
	cert.Serial = serial
	if err := cert.SignCert(a.rand, a.signer); err != nil {
		return fmt.Errorf("sign with %s CA: %w", a.name, err)
	}
	return nil
}

func randomSerial(r io.Reader) (uint64, error) {
	var b [8]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, fmt.Errorf("random serial: %w", err)
		}
		// Zero reads as "no serial" in KRLs and logs; draw again.
		if s := binary.BigEndian.Uint64(b[:]); s != 0 {
			return s, nil
		}
	}
}

// keyAlgoDSA is OpenSSH's name for DSA keys (x/crypto deprecated its
// constant with the algorithm; the name is still what old clients send).
const keyAlgoDSA = "ssh-dss"

// checkSubjectKey refuses keys a CA should not certify: none, a certificate,
// DSA, and RSA under 2048 bits.
func checkSubjectKey(pub ssh.PublicKey) error {
	if pub == nil {
		return fmt.Errorf("%w: no public key", ErrInvalidRequest)
	}
	if isCertificate(pub) {
		return fmt.Errorf("%w: cannot certify a certificate", ErrInvalidRequest)
	}
	switch pub.Type() {
	case keyAlgoDSA:
		return fmt.Errorf("%w: DSA keys are not accepted", ErrInvalidRequest)
	case ssh.KeyAlgoRSA:
		if ck, ok := pub.(ssh.CryptoPublicKey); ok {
			if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < 2048 {
				return fmt.Errorf("%w: RSA key of %d bits, want at least 2048", ErrInvalidRequest, rk.N.BitLen())
			}
		}
	}
	return nil
}

// validName accepts a principal or option value: non-empty, printable, no
// spaces or commas (OpenSSH splits principal lists on commas).
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == ',' || r == 0x7f {
			return false
		}
	}
	return true
}
