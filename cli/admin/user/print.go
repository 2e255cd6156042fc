package user

import (
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// printInvite shows a new invite: on a terminal, what to hand the user;
// piped, one tab-separated line (email, user id, code, expiry).
func printInvite(ios *cmdutil.IOStreams, verb string, r *api.UserInviteResponse) error {
	u, inv := r.User, r.Invite
	if !ios.IsStdoutTTY() {
		_, err := fmt.Fprintf(ios.Out, "%s\t%s\t%s\t%s\n", u.Email, u.ID, inv.Code, inv.ExpiresAt.UTC().Format(time.RFC3339))
		return err
	}
	cs := ios.ColorScheme()
	_, err := fmt.Fprintf(ios.Out, `%s %s (%s, %s).
Invite code, shown only this once, valid until %s:

  %s

Give it to them privately; they set their password and log in with:

  gpuaas login --invite %s
`, verb, u.Email, u.Role, u.ID, inv.ExpiresAt.Local().Format(time.DateTime), cs.Bold(inv.Code), inv.Code)
	return err
}

// printUser shows one user after a change.
func printUser(ios *cmdutil.IOStreams, verb string, u *api.AdminUser) error {
	if !ios.IsStdoutTTY() {
		_, err := fmt.Fprintf(ios.Out, "%s\t%s\t%s\n", u.Email, u.ID, u.State)
		return err
	}
	_, err := fmt.Fprintf(ios.Out, "%s %s (%s); now %s\n", verb, u.Email, u.ID, u.State)
	return err
}

// printUsers prints users as a table.
func printUsers(ios *cmdutil.IOStreams, now time.Time, users []api.AdminUser) error {
	if len(users) == 0 && ios.IsStdoutTTY() {
		_, err := ios.ErrOut.Write([]byte("No users\n"))
		return err
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("email", "role", "provider", "state", "created", "last login", "id")
	for _, u := range users {
		t.AddField(u.Email)
		t.AddField(u.Role)
		t.AddField(u.Provider)
		switch u.State {
		case api.UserDisabled:
			t.AddField(u.State, cmdutil.WithColor(cs.Red))
		case api.UserInvited:
			t.AddField(u.State, cmdutil.WithColor(cs.Yellow))
		default:
			t.AddField(u.State)
		}
		t.AddField(cmdutil.FormatTime(ios, now, u.CreatedAt))
		var last time.Time
		if u.LastLoginAt != nil {
			last = *u.LastLoginAt
		}
		t.AddField(cmdutil.FormatTime(ios, now, last))
		t.AddField(u.ID)
		t.EndRow()
	}
	return t.Render()
}
