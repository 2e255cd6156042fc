-- Placeholder on branch apps only: migration 0028 belongs to another branch of this sitting.
-- When merging, keep that branch's 0028 and delete this file (tern needs contiguous numbers).
SELECT 1;
