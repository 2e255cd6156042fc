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

-- Gateway keys (controld/ca): the long-lived keys of the SSH gateways that
-- an admin registered. gate.credentials certifies only these, so a stolen
-- gateway token alone cannot get a gateway certificate for a key of its
-- own, and hostd lets in only connections that first prove a gateway
-- certificate.
CREATE TABLE gateway_keys (
    id          text PRIMARY KEY,          -- SHA256 fingerprint
    name        text NOT NULL,
    public_key  text NOT NULL,             -- authorized_keys format
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
CREATE UNIQUE INDEX gateway_keys_name_idx ON gateway_keys (name) WHERE revoked_at IS NULL;
