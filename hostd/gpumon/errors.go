package gpumon

import "errors"

// ErrBadOutput is nvidia-smi output that is not of the queried form.
var ErrBadOutput = errors.New("gpumon: unexpected nvidia-smi output")
