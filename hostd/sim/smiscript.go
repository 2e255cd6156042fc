package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The nvidia-smi a person runs on a sim machine: a POSIX sh script,
// written per machine (the host, each guest) with its GPUs' fixed facts,
// that reads the same knob files as answerSMI (gpus.go), so an
// interactive shell, `ssh ID nvidia-smi` and hostd's telemetry agree.
// It simulates what people type: no arguments (the summary table), -L,
// --query-gpu with the usual fields and --format=csv[,noheader][,nounits],
// and -i to pick GPUs. TestSMIScriptMatchesAnswerSMI keeps its numbers
// equal to answerSMI's.

// smiDriverVersion and smiCUDAVersion are what the sim's driver reports.
const (
	smiDriverVersion = "550.127.05"
	smiCUDAVersion   = "12.4"
)

// smiProductName is nvidia-smi's name of a GPU model.
var smiProductName = map[string]string{"H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}

// SMIDir is where a sim host under stateDir keeps its nvidia-smi scripts:
// host/ for the host's own, guests/<domain>/ for each guest's.
func SMIDir(stateDir string) string { return filepath.Join(stateDir, "sim", "smi") }

// writeSMIScript writes dir/nvidia-smi for rows, a machine's GPUs in its
// numbering, reading loads and ECC counts from knobDir. dir and the
// script are readable by everyone: the machine's users run it.
func writeSMIScript(dir, knobDir, model string, rows []smiRow) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nvidia-smi script: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("nvidia-smi script: %w", err)
	}
	name, ok := smiProductName[model]
	if !ok {
		name = "NVIDIA " + model
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# nvidia-smi of a gpuaas sim machine (hostd/sim/smiscript.go): simulated, not NVIDIA's.\n")
	fmt.Fprintf(&b, "knobs=%s\nname=%s\ndriver=%s\ncuda=%s\ncount=%d\n", shQuote(knobDir), shQuote(name),
		smiDriverVersion, smiCUDAVersion, len(rows))
	b.WriteString("gpu() {\n\tcase $1 in\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "\t%d) pci=%s bus=%s uuid=%s mem=%d idlew=%d maxw=%d ;;\n", r.index, r.gpu.pci, r.busID, r.gpu.uuid,
			r.gpu.memMiB, int(r.gpu.idleW), int(r.gpu.maxW))
	}
	b.WriteString("\t*) return 1 ;;\n\tesac\n}\n")
	b.WriteString(smiScriptBody)
	tmp := filepath.Join(dir, ".nvidia-smi.tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o755); err != nil {
		return fmt.Errorf("nvidia-smi script: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // whatever the umask
		return fmt.Errorf("nvidia-smi script: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "nvidia-smi")); err != nil {
		return fmt.Errorf("nvidia-smi script: %w", err)
	}
	return nil
}

// makeSMIDirs makes SMIDir(stateDir) and its guests/ directory, open to
// everyone (renters' sessions run the scripts), and returns SMIDir.
func makeSMIDirs(stateDir string) (string, error) {
	dir := SMIDir(stateDir)
	for _, d := range []string{dir, filepath.Join(dir, "guests")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// smiScriptBody is the script after its machine's facts. The numbers are
// answerSMI's: memory used (load+10)% (at most 95%) under load, 35 °C +
// 0.4 °C per % of load, idle to maximum power linearly with the load.
const smiScriptBody = `
knob() { # knob PCI NAME MAX: the knob file's integer, 0 when absent or not one
	v=
	f="$knobs/$1.$2"
	[ ! -r "$f" ] || read -r v < "$f" || :
	case $v in '' | *[!0-9]*) v=0 ;; esac
	if [ ${#v} -gt 10 ] || [ "$v" -gt "$3" ]; then v=$3; fi
	echo "$v"
}

load_gpu() { # load_gpu INDEX: the GPU's facts and its state now
	gpu "$1" || return 1
	load=$(knob "$pci" load 100)
	ecc=$(knob "$pci" ecc 1073741824)
	used=0
	if [ "$load" -gt 0 ]; then
		p=$((load + 10)); [ $p -gt 95 ] && p=95
		used=$((mem * p / 100))
	fi
	free=$((mem - used))
	temp=$((35 + load * 2 / 5))
	cw=$((idlew * 100 + (maxw - idlew) * load))
	power=$(printf '%d.%02d' $((cw / 100)) $((cw % 100)))
	memutil=$((load * 3 / 4))
}

usage() {
	cat <<'EOF'
NVIDIA System Management Interface (simulated by gpuaas)

Usage: nvidia-smi [-L] [-i ID[,ID]] [--query-gpu=FIELDS --format=csv[,noheader][,nounits]]

  (no arguments)   a summary of the GPUs
  -L, --list-gpus  one line per GPU, with its UUID
  -i, --id=ID      only the GPUs of these indexes
  --query-gpu=...  index, count, name, uuid, pci.bus_id, driver_version, pstate,
                   memory.total, memory.used, memory.free, utilization.gpu,
                   utilization.memory, temperature.gpu, power.draw, power.limit,
                   fan.speed, ecc.errors.uncorrected.volatile.total
EOF
}

invalid() {
	echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help." >&2
	exit 2
}

list=0 query= format= ids=
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage; exit 0 ;;
	-L | --list-gpus) list=1 ;;
	-i | --id) [ $# -ge 2 ] || invalid; ids=$2; shift ;;
	-i=* | --id=*) ids=${1#*=} ;;
	--query-gpu) [ $# -ge 2 ] || invalid; query=$2; shift ;;
	--query-gpu=*) query=${1#*=} ;;
	--format) [ $# -ge 2 ] || invalid; format=$2; shift ;;
	--format=*) format=${1#*=} ;;
	*) echo "Invalid argument: $1" >&2; invalid ;;
	esac
	shift
done

if [ "$count" -eq 0 ]; then
	echo "No devices were found"
	exit 6
fi
indexes=
if [ -n "$ids" ]; then
	for i in $(echo "$ids" | tr ',' ' '); do
		if ! gpu "$i" 2>/dev/null; then
			echo "No devices were found"
			exit 6
		fi
		indexes="$indexes $i"
	done
else
	i=0
	while [ $i -lt "$count" ]; do indexes="$indexes $i"; i=$((i + 1)); done
fi

if [ "$list" = 1 ]; then
	[ -z "$query" ] || invalid
	for i in $indexes; do
		gpu "$i"
		echo "GPU $i: $name (UUID: $uuid)"
	done
	exit 0
fi

if [ -n "$query" ]; then
	header=1 units=1
	case $format in
	csv) ;;
	csv,noheader) header=0 ;;
	csv,nounits) units=0 ;;
	csv,noheader,nounits | csv,nounits,noheader) header=0 units=0 ;;
	'') echo 'Missing --format argument: use --format=csv (with ,noheader and ,nounits if wanted).' >&2; exit 2 ;;
	*) echo "\"$format\" is not a valid format: use csv, csv,noheader, csv,nounits or csv,noheader,nounits." >&2; exit 2 ;;
	esac
	fields=$(echo "$query" | tr ',' ' ')
	line=
	for f in $fields; do
		case $f in
		index | count | name | gpu_name | uuid | gpu_uuid | pci.bus_id | gpu_bus_id | driver_version | pstate | \
			temperature.gpu | ecc.errors.uncorrected.volatile.total) u= ;;
		memory.total | memory.used | memory.free) u=' [MiB]' ;;
		utilization.gpu | utilization.memory | fan.speed) u=' [%]' ;;
		power.draw | power.limit) u=' [W]' ;;
		*) echo "Field \"$f\" is not a valid field to query." >&2; exit 2 ;;
		esac
		line="$line${line:+, }$f$u"
	done
	[ $header = 0 ] || echo "$line"
	for i in $indexes; do
		load_gpu "$i"
		line=
		for f in $fields; do
			case $f in
			index) v=$i ;;
			count) v=$count ;;
			name | gpu_name) v=$name ;;
			uuid | gpu_uuid) v=$uuid ;;
			pci.bus_id | gpu_bus_id) v=$bus ;;
			driver_version) v=$driver ;;
			pstate) v=P0 ;;
			memory.total) v=$mem ;;
			memory.used) v=$used ;;
			memory.free) v=$free ;;
			utilization.gpu) v=$load ;;
			utilization.memory) v=$memutil ;;
			temperature.gpu) v=$temp ;;
			power.draw) v=$power ;;
			power.limit) v="$maxw.00" ;;
			fan.speed) v='[N/A]' ;;
			ecc.errors.uncorrected.volatile.total) v=$ecc ;;
			esac
			if [ $units = 1 ] && [ "$v" != '[N/A]' ]; then
				case $f in
				memory.*) v="$v MiB" ;;
				utilization.*) v="$v %" ;;
				power.*) v="$v W" ;;
				esac
			fi
			line="$line${line:+, }$v"
		done
		echo "$line"
	done
	exit 0
fi
[ -z "$format" ] || invalid

sep='+-----------------------------------------+------------------------+----------------------+'
date '+%a %b %e %H:%M:%S %Y'
echo '+-----------------------------------------------------------------------------------------+'
printf '| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-8s |\n' "$driver" "$driver" "$cuda"
echo '|-----------------------------------------+------------------------+----------------------+'
echo '| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |'
echo '| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |'
echo '|=========================================+========================+======================|'
for i in $indexes; do
	load_gpu "$i"
	printf '| %3d  %-28s  On  | %18s Off | %20s |\n' "$i" "$name" "$bus" "$ecc"
	printf '| N/A  %3dC    P0 %13s / %4dW | %8sMiB / %6sMiB | %5s%%      Default |\n' "$temp" "${power%.*}W" "$maxw" "$used" "$mem" "$load"
	echo "$sep"
done
echo
echo '+-----------------------------------------------------------------------------------------+'
echo '| Processes:                                                                              |'
echo '|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |'
echo '|=========================================================================================|'
echo '|  No running processes found                                                             |'
echo '+-----------------------------------------------------------------------------------------+'
`
