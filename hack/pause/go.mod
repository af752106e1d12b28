// The sandbox ("pause") process of the real-node tests' pods: nothing can be pulled
// there, so the pod sandbox image is built here from this module.
module podium.dev/hack/pause

go 1.26.0
