// Package manifests builds and rewrites the objects the platform applies: upstream
// releases made to reach their controllers on 127.0.0.1, and small objects of its own.
package manifests

import (
	"encoding/base64"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Object is an object of kind with name (in namespace, unless empty) and the top-level
// fields in extra.
func Object(apiVersion, kind, namespace, name string, extra map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	for k, v := range extra {
		obj[k] = v
	}
	return &unstructured.Unstructured{Object: obj}
}

// Addon describes how one upstream release (rendered from its pinned module with
// `kubectl kustomize config/default`) becomes local: only its CRDs and webhook
// configurations are installed, and every webhook points at the local process.
type Addon struct {
	// WebhookPort is where the local controller serves its webhooks on 127.0.0.1.
	WebhookPort int
	// KeepConversion lists CRDs (by name) whose conversion webhook the controller serves;
	// every other CRD's conversion is set to None.
	KeepConversion []string
	// WebhookGroups, when set, keeps only webhooks whose rules touch these API groups, so
	// integrations that are switched off add no admission round trip (and no failure
	// point) to, say, every Pod creation.
	WebhookGroups []string
}

// Localize returns the CRDs and webhook configurations of a rendered release, rewritten
// to reach the controller at https://127.0.0.1:<WebhookPort> with caBundle.
func (a Addon) Localize(objs []*unstructured.Unstructured, caBundle []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		switch obj.GetKind() {
		case "CustomResourceDefinition":
			crd := obj.DeepCopy()
			if err := a.localizeConversion(crd, caBundle); err != nil {
				return nil, err
			}
			out = append(out, crd)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			cfg := obj.DeepCopy()
			if err := a.localizeWebhooks(cfg, caBundle); err != nil {
				return nil, err
			}
			out = append(out, cfg)
		}
	}
	return out, nil
}

func (a Addon) url(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", a.WebhookPort, path)
}

func (a Addon) localizeConversion(crd *unstructured.Unstructured, caBundle []byte) error {
	strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
	if strategy != "Webhook" {
		return nil
	}
	if !slices.Contains(a.KeepConversion, crd.GetName()) {
		return unstructured.SetNestedMap(crd.Object, map[string]any{"strategy": "None"}, "spec", "conversion")
	}
	path, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "path")
	if path == "" {
		return fmt.Errorf("CRD %s: conversion webhook has no service path", crd.GetName())
	}
	return unstructured.SetNestedMap(crd.Object, map[string]any{
		"url":      a.url(path),
		"caBundle": encodeBase64(caBundle),
	}, "spec", "conversion", "webhook", "clientConfig")
}

func (a Addon) localizeWebhooks(cfg *unstructured.Unstructured, caBundle []byte) error {
	hooks, _, err := unstructured.NestedSlice(cfg.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("%s %s: webhooks: %w", cfg.GetKind(), cfg.GetName(), err)
	}
	var kept []any
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: webhook is not an object", cfg.GetKind(), cfg.GetName())
		}
		if !a.wantWebhook(hook) {
			continue
		}
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		if path == "" {
			return fmt.Errorf("%s %s: webhook %v has no service path", cfg.GetKind(), cfg.GetName(), hook["name"])
		}
		hook["clientConfig"] = map[string]any{"url": a.url(path), "caBundle": encodeBase64(caBundle)}
		kept = append(kept, hook)
	}
	return unstructured.SetNestedSlice(cfg.Object, kept, "webhooks")
}

func (a Addon) wantWebhook(hook map[string]any) bool {
	if len(a.WebhookGroups) == 0 {
		return true
	}
	rules, _, _ := unstructured.NestedSlice(hook, "rules")
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
		for _, g := range groups {
			if slices.Contains(a.WebhookGroups, g) {
				return true
			}
		}
	}
	return false
}
