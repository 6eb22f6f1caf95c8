package collect

import (
	"regexp"
	"strings"
)

// kubeProxyTag is a kube-proxy image's version tag: v1.37.2, also with a
// suffix (v1.37.2-eks-1-37-5), or a digest after it.
var kubeProxyTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+`)

// KubeProxyVersion is the version in the tag of a kube-proxy image
// ("registry.k8s.io/kube-proxy:v1.37.2" → "v1.37.2"), "" for another
// image (--image) or an image without a version tag.
func KubeProxyVersion(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	name, tag, ok := strings.Cut(image[slash+1:], ":")
	if !ok || name != "kube-proxy" {
		return ""
	}
	return kubeProxyTag.FindString(tag)
}
