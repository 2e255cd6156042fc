-- Placeholder for migration 0011, which issue 12 assigns to the sshcmds
-- branch (0011_default_projects.sql). tern numbers migrations without
-- gaps, so this branch's 0012 needs an 0011 to run. When merging after
-- sshcmds, DELETE THIS FILE: two 0011 files fail every migration with
-- "Duplicate migration 11".
SELECT 1;
