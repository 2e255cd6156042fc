package tui

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
)

// wizardStep is one page of the create wizard.
type wizardStep int

const (
	stepSKU wizardStep = iota
	stepGPUs
	stepProject
	stepConfirm
)

// wizard is the create wizard's state: SKU, GPU count, project, then a
// summary with the price and controld's dry-run verdict.
type wizard struct {
	step       wizardStep
	skuFilter  string
	skuCursor  int
	sku        api.SKU
	gpuCursor  int
	projects   []string
	projCursor int

	verdictFor verdictKey
	verdict    *Verdict
	verdictErr error
	checking   bool

	busy bool // the create is in flight
	err  error
}

// openWizard starts the wizard on the SKU page.
func (m *Model) openWizard() tea.Cmd {
	if len(m.skus) == 0 {
		m.setError(errors.New("the catalog is not loaded yet (or empty); try again in a moment"))
		return m.loadCatalog()
	}
	w := wizard{}
	for _, p := range m.projects {
		w.projects = append(w.projects, p.Name)
	}
	if m.project != "" && !slices.Contains(w.projects, m.project) {
		w.projects = append([]string{m.project}, w.projects...)
	}
	w.projCursor = max(0, slices.Index(w.projects, m.project))
	m.wiz = w
	m.view = viewAllocs
	m.mode = modeWizard
	return nil
}

// filteredSKUs are the SKUs whose id or model contains the typed filter.
func (m *Model) filteredSKUs() []api.SKU {
	f := strings.ToLower(m.wiz.skuFilter)
	var out []api.SKU
	for _, s := range m.skus {
		if strings.Contains(strings.ToLower(s.ID+" "+s.GPUModel+" "+s.Shape), f) {
			out = append(out, s)
		}
	}
	return out
}

func (m *Model) keyWizard(k tea.KeyMsg) tea.Cmd {
	w := &m.wiz
	if k.Type == tea.KeyCtrlC {
		return tea.Quit
	}
	if w.busy {
		return nil // creating: wait for controld's answer
	}
	w.err = nil
	switch w.step {
	case stepSKU:
		skus := m.filteredSKUs()
		switch k.Type {
		case tea.KeyEsc:
			m.mode = modeNormal
		case tea.KeyUp:
			w.skuCursor = max(0, w.skuCursor-1)
		case tea.KeyDown:
			w.skuCursor = min(len(skus)-1, w.skuCursor+1)
		case tea.KeyBackspace:
			if r := []rune(w.skuFilter); len(r) > 0 {
				w.skuFilter, w.skuCursor = string(r[:len(r)-1]), 0
			}
		case tea.KeyRunes:
			w.skuFilter, w.skuCursor = w.skuFilter+string(k.Runes), 0
		case tea.KeyEnter:
			if len(skus) == 0 {
				w.err = fmt.Errorf("no SKU matches %q", w.skuFilter)
				return nil
			}
			w.sku = skus[max(0, w.skuCursor)]
			w.gpuCursor = 0
			w.step = stepGPUs
		}
	case stepGPUs:
		counts := w.sku.GPUCounts
		switch k.Type {
		case tea.KeyEsc, tea.KeyBackspace:
			w.step = stepSKU
		case tea.KeyUp, tea.KeyLeft:
			w.gpuCursor = max(0, w.gpuCursor-1)
		case tea.KeyDown, tea.KeyRight:
			w.gpuCursor = min(len(counts)-1, w.gpuCursor+1)
		case tea.KeyRunes:
			n, err := strconv.Atoi(string(k.Runes))
			if i := slices.Index(counts, n); err == nil && i >= 0 {
				w.gpuCursor = i
			} else {
				w.err = fmt.Errorf("%s comes with %s GPUs", w.sku.ID, joinCounts(counts))
			}
		case tea.KeyEnter:
			if len(counts) == 0 {
				w.err = fmt.Errorf("%s offers no GPU counts", w.sku.ID)
				return nil
			}
			w.step = stepProject
		}
	case stepProject:
		switch k.Type {
		case tea.KeyEsc, tea.KeyBackspace:
			w.step = stepGPUs
		case tea.KeyUp:
			w.projCursor = max(0, w.projCursor-1)
		case tea.KeyDown:
			w.projCursor = min(len(w.projects)-1, w.projCursor+1)
		case tea.KeyEnter:
			if len(w.projects) == 0 {
				w.err = errors.New("you have no project: create one with `gpuaas project create NAME`")
				return nil
			}
			w.step = stepConfirm
			return m.checkVerdict()
		}
	case stepConfirm:
		switch k.String() {
		case "esc", "backspace", "n":
			w.step = stepProject
		case "enter", "y":
			w.busy = true
			key := w.key()
			return m.createAlloc(api.AllocCreateRequest{SKU: key.sku, GPUs: key.gpus, Project: key.project})
		}
	}
	return nil
}

// key is what the wizard would create.
func (w *wizard) key() verdictKey {
	k := verdictKey{sku: w.sku.ID}
	if w.gpuCursor >= 0 && w.gpuCursor < len(w.sku.GPUCounts) {
		k.gpus = w.sku.GPUCounts[w.gpuCursor]
	}
	if w.projCursor >= 0 && w.projCursor < len(w.projects) {
		k.project = w.projects[w.projCursor]
	}
	return k
}

// checkVerdict asks for a dry run of what the wizard would create.
func (m *Model) checkVerdict() tea.Cmd {
	w := &m.wiz
	k := w.key()
	if w.verdictFor == k && (w.verdict != nil || w.verdictErr != nil || w.checking) {
		return nil
	}
	w.verdictFor, w.verdict, w.verdictErr, w.checking = k, nil, nil, true
	return m.dryRun(k)
}

// setVerdict takes a dry-run answer, unless the wizard moved on.
func (w *wizard) setVerdict(msg verdictMsg) {
	if msg.key != w.verdictFor {
		return
	}
	w.checking, w.verdict, w.verdictErr = false, msg.verdict, msg.err
}

func joinCounts(counts []int) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = strconv.Itoa(c)
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
	}
	return strings.Join(parts, "")
}

// renderWizard renders the wizard's current page, w cells wide.
func (m *Model) renderWizard(width int) string {
	w := &m.wiz
	st := m.st
	var b strings.Builder
	steps := []string{"1 SKU", "2 GPUs", "3 project", "4 confirm"}
	for i, s := range steps {
		if i > 0 {
			b.WriteString(st.dim.Render(" › "))
		}
		if wizardStep(i) == w.step {
			b.WriteString(st.key.Render(s))
		} else {
			b.WriteString(st.dim.Render(s))
		}
	}
	b.WriteString("\n\n")
	cursor := func(on bool) string {
		if on {
			return st.key.Render("› ")
		}
		return "  "
	}
	switch w.step {
	case stepSKU:
		b.WriteString("SKU: " + w.skuFilter + "█  " + st.dim.Render("(type to filter)") + "\n")
		for i, s := range m.filteredSKUs() {
			line := fmt.Sprintf("%s %-10s %-5s %s/GPU-h  %s GPUs", fit(s.ID, 16, false), s.Shape, s.GPUModel,
				api.FormatMoney(s.PricePerGPUHourMinor, s.Currency), joinCounts(s.GPUCounts))
			b.WriteString(cursor(i == w.skuCursor) + line + "\n")
		}
	case stepGPUs:
		b.WriteString(fmt.Sprintf("GPUs for %s:\n", st.bold.Render(w.sku.ID)))
		for i, n := range w.sku.GPUCounts {
			b.WriteString(fmt.Sprintf("%s%d × %s  %s/h\n", cursor(i == w.gpuCursor), n, w.sku.GPUModel,
				api.FormatMoney(hourlyMinor(w.sku, n), w.sku.Currency)))
		}
	case stepProject:
		b.WriteString("Project:\n")
		for i, p := range w.projects {
			b.WriteString(cursor(i == w.projCursor) + p + "\n")
		}
		if len(w.projects) == 0 {
			b.WriteString(st.dim.Render("  (none)") + "\n")
		}
	case stepConfirm:
		k := w.key()
		b.WriteString(fmt.Sprintf("Create %s × %d GPU in project %s\n", st.bold.Render(k.sku), k.gpus, st.bold.Render(k.project)))
		b.WriteString("price:   " + api.FormatMoney(hourlyMinor(w.sku, k.gpus), w.sku.Currency) + "/h\n")
		b.WriteString(m.verdictText() + "\n\n")
		if w.busy {
			b.WriteString(st.dim.Render("creating…"))
		} else {
			b.WriteString(st.key.Render("enter") + " create   " + st.key.Render("esc") + " back")
		}
		b.WriteString("\n")
	}
	if w.err != nil {
		b.WriteString("\n" + st.flashErr.Render(errorText(w.err)) + "\n")
	}
	return st.dialog.Width(max(20, min(width-2, 76))).Render(strings.TrimRight(b.String(), "\n"))
}

// verdictText is the dry-run verdict in words.
func (m *Model) verdictText() string {
	w := &m.wiz
	switch {
	case w.checking:
		return "verdict: " + m.st.dim.Render("checking…")
	case errors.Is(w.verdictErr, ErrUnsupported):
		return m.st.dim.Render("verdict unavailable")
	case w.verdictErr != nil:
		return "verdict: " + m.st.bad.Render(errorText(w.verdictErr))
	case w.verdict == nil:
		return m.st.dim.Render("verdict unavailable")
	}
	v := w.verdict
	var parts []string
	switch {
	case v.Fits:
		parts = append(parts, m.st.ok.Render("fits now"))
	case v.QueuePosition > 0:
		parts = append(parts, m.st.warn.Render(fmt.Sprintf("no capacity now; queue position %d", v.QueuePosition)))
	default:
		parts = append(parts, m.st.bad.Render("does not fit"))
	}
	if v.BalanceMinor != nil {
		parts = append(parts, "balance "+api.FormatMoney(*v.BalanceMinor, v.Currency))
	}
	if v.RunwaySeconds != nil {
		parts = append(parts, "runway "+api.FormatRunway(*v.RunwaySeconds))
	}
	return "verdict: " + strings.Join(parts, " · ")
}
