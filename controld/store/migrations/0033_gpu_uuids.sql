-- The driver check before billing (docs/slices.md, "Driver check";
-- decision 0029): each slot's GPU UUID, recorded at topology discovery,
-- is what controld compares the guest's `nvidia-smi -L` with before an
-- allocation becomes active. '' means the inventory does not know it
-- (the check then fails closed).
ALTER TABLE slots ADD COLUMN gpu_uuid text NOT NULL DEFAULT '';

-- A test node may report simulated GPUs (UUIDs GPU-SIM-..., printed by the
-- test guest image's simulated nvidia-smi); any other node's slice with
-- them fails. Set at enrollment from the token (`gpuaas dev` only).
ALTER TABLE enrollment_tokens ADD COLUMN test_node boolean NOT NULL DEFAULT false;
ALTER TABLE nodes ADD COLUMN test_node boolean NOT NULL DEFAULT false;
