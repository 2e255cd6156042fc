-- ECC faults (issue 16, item 4): besides the XIDs of the kernel log, hostd
-- reports an increase of a GPU's uncorrected volatile ECC count as a GPU
-- fault. kind tells them apart ('xid' or 'ecc'); an ECC fault has xid 0
-- and the count after the increase. A resend is the same fault when node,
-- GPU, kind, XID and time are.
ALTER TABLE gpu_faults
    ADD COLUMN kind            text NOT NULL DEFAULT 'xid' CHECK (kind IN ('xid', 'ecc')),
    ADD COLUMN ecc_uncorrected bigint NOT NULL DEFAULT 0;
ALTER TABLE gpu_faults DROP CONSTRAINT gpu_faults_pkey;
ALTER TABLE gpu_faults ADD PRIMARY KEY (node_id, gpu_pci, kind, xid, at);
