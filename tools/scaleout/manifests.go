package main

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// replayDeployment is the Deployment of the replicas in the manifests.
const replayDeployment = "wtrace-replay"

// replicaArgs builds the kustomization dir (as kubectl kustomize does)
// and returns the arguments of its replay container after the session —
// `wtrace replay SESSION ARGS…` — without --listen (the tool's) and with
// the container's literal environment expanded as the kubelet expands
// $(VAR). A replica started with them serves as a deployed one does: the
// same --writes, --speed, --accept-hosts, log format and grace. The
// shutdown delay is 0: it waits for a Service's endpoints to drop a
// stopping replica, and the tool's HAProxy probes nothing.
func replicaArgs(dir string) ([]string, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	for _, r := range res.Resources() {
		if r.GetKind() != "Deployment" || r.GetName() != replayDeployment {
			continue
		}
		m, err := r.Map()
		if err != nil {
			return nil, err
		}
		return containerArgs(m)
	}
	return nil, fmt.Errorf("%s builds no Deployment %s", dir, replayDeployment)
}

// containerArgs reads the first container of a Deployment's pod template.
func containerArgs(d map[string]any) ([]string, error) {
	spec, _ := dig(d, "spec", "template", "spec").(map[string]any)
	cs, _ := spec["containers"].([]any)
	if len(cs) == 0 {
		return nil, fmt.Errorf("deployment %s has no container", replayDeployment)
	}
	c, _ := cs[0].(map[string]any)
	env := map[string]string{}
	if es, ok := c["env"].([]any); ok {
		for _, e := range es {
			e, _ := e.(map[string]any)
			if v, ok := e["value"].(string); ok {
				env[fmt.Sprint(e["name"])] = v
			}
		}
	}
	raw, _ := c["args"].([]any)
	if len(raw) < 2 || raw[0] != "replay" {
		return nil, fmt.Errorf("deployment %s: container args %v; want replay SESSION …", replayDeployment, raw)
	}
	var out []string
	for i := 2; i < len(raw); i++ {
		a := fmt.Sprint(raw[i])
		if a == "--listen" {
			i++
			continue
		}
		if strings.HasPrefix(a, "--listen=") {
			continue
		}
		if strings.HasPrefix(a, "--shutdown-delay=") {
			a = "--shutdown-delay=0s"
		}
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if strings.Contains(a, "$(") {
			return nil, fmt.Errorf("deployment %s: argument %q names a variable the tool cannot set", replayDeployment, a)
		}
		out = append(out, a)
	}
	return out, nil
}

func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}
