// Package charttest validates the Helm chart (deploy/helm/inferbid) and the
// KServe manifests (deploy/kserve) offline: helm lint, helm template with the
// default values and with testdata/values-all.yaml, and every rendered object
// decoded strictly (unknown fields rejected) into its typed Kubernetes API
// struct from k8s.io/api. The CRD kinds (ServiceMonitor, ClusterServingRuntime,
// InferenceService) are decoded into minimal structs of this package holding
// only the fields inferbid uses, with k8s.io/api types inside (containers,
// volumes), rather than the upstream Go modules, which pull in controllers.
//
// TestOneImageTag checks that make image's default tag (make
// print-image-tag), the chart's default image and the KServe runtimes name
// one tag, the chart's appVersion; TestDeployReadme runs deploy/README.md's
// steps (helm install rendered as helm template, kubectl apply shimmed to
// print) and checks that every image they deploy is one make image builds,
// under the registry the page pushes to.
//
// helm comes from the Go module proxy (scripts/install-helm.sh, `make
// deps-helm`); without it the helm tests skip, unless
// INFERBID_REQUIRE_HELM=1 (make test-deploy) makes them fail.
package charttest
