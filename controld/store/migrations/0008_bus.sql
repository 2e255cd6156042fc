-- Reserved for issue [1/7] (zero-trust bus); filled by the branch that owns it.
SELECT 1;
