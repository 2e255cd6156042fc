package store

import "errors"

// ErrRoleSetup means the role controld logs in as can neither create
// AppRole nor make itself a member: the one-time InitDB (run by a
// superuser) has not been done for it.
var ErrRoleSetup = errors.New("the login role is not a member of " + AppRole + " and may not create or grant it")

// ErrInitDBRights means the role InitDB runs as may not create roles and
// databases.
var ErrInitDBRights = errors.New("init-db needs a superuser (or a role with CREATEROLE and CREATEDB)")
