-- Reserved for issue 12's branch 'sshcmds', which fills it (tern needs the numbers
-- without gaps for 0014 on branch 'shutdown'). Its real file replaces this one.
SELECT 1;
