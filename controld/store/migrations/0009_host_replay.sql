-- Defence in depth between controld, hostd and sshgate (issue [1/7], item 8).

-- Anti-replay state of node reports (controld/hosts): every report a node
-- signs carries a sequence number; high is the highest accepted, seen a
-- bitmap of which of the 256 numbers up to it were (bit i: high - i), so a
-- captured report re-published is refused by every replica alike.
CREATE TABLE node_report_seq (
    node_id    text PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    high       bigint NOT NULL CHECK (high >= 0),
    seen       bytea NOT NULL,
    updated_at timestamptz NOT NULL
);
