// A reference CDI reader for the differential test (scripts/cdi-readers.sh builds it against a Debian release's
// CDI library; @CDI@ is that library's import path). Usage: reader SPEC-DIR DEVICE... ; prints one JSON object:
//
//	files:   {file name: {ok, error}}            every *.json/*.yaml file as cdi.ReadSpec reads it
//	devices: [qualified name]                     what the cache resolves (conflicts dropped), sorted
//	edits:   {qualified name: {spec, error}}      the OCI spec after InjectDevices of that one device
//	                                              into an empty spec (each requested DEVICE, else every device)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	oci "github.com/opencontainers/runtime-spec/specs-go"

	"@CDI@/pkg/cdi"
)

type fileResult struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type editResult struct {
	Spec  *oci.Spec `json:"spec,omitempty"`
	Error string    `json:"error,omitempty"`
}

func readSpec(path string) (res fileResult) {
	defer func() {
		if r := recover(); r != nil {
			res = fileResult{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	if _, err := cdi.ReadSpec(path, 0); err != nil {
		return fileResult{Error: err.Error()}
	}
	return fileResult{OK: true}
}

func inject(cache *cdi.Cache, device string) (res editResult) {
	defer func() {
		if r := recover(); r != nil {
			res = editResult{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, device); err != nil {
		return editResult{Error: err.Error()}
	}
	return editResult{Spec: spec}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: reader SPEC-DIR [DEVICE...]")
		os.Exit(2)
	}
	dir := os.Args[1]
	out := map[string]interface{}{}
	files := map[string]fileResult{}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	sort.Strings(names)
	for _, p := range names {
		ext := filepath.Ext(p)
		if ext != ".json" && ext != ".yaml" {
			continue
		}
		files[filepath.Base(p)] = readSpec(p)
	}
	out["files"] = files
	devices := []string{}
	edits := map[string]editResult{}
	func() {
		defer func() {
			if r := recover(); r != nil {
				out["panic"] = fmt.Sprintf("%v", r)
			}
		}()
		cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
		if err != nil && cache == nil {
			out["error"] = err.Error()
			return
		}
		_ = cache.Refresh()
		devices = cache.ListDevices()
		sort.Strings(devices)
		wanted := os.Args[2:]
		if len(wanted) == 0 {
			wanted = devices
		}
		for _, d := range wanted {
			edits[d] = inject(cache, d)
		}
	}()
	out["devices"] = devices
	out["edits"] = edits
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
