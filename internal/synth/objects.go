package synth

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeOf is the node an endpoint's pod runs on: endpoints are spread over
// 100 nodes, node-000 being the one the generated rules come from.
func (c Cluster) nodeOf(i, j int) string { return fmt.Sprintf("node-%03d", (i+j)%100) }

// uid is a deterministic UID for object n of a kind.
func uid(kind, n int) string {
	x := uint64(n+1)*0x9E3779B97F4A7C15 + uint64(kind)
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", uint32(x>>32), uint16(x>>16), uint16(x), uint16(x>>48), x&0xffffffffffff)
}

// WriteObjectsJSON writes Objects as one compact v1 List in the field order
// of the API types: what the API server's list responses hold and what
// `collect` saves in a bundle (25 MB at 5,000 Services × 20 endpoints).
func (c Cluster) WriteObjectsJSON(w io.Writer) error {
	objs := c.Objects()
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	add := func(o any) error {
		data, err := json.Marshal(o)
		list.Items = append(list.Items, runtime.RawExtension{Raw: data})
		return err
	}
	for _, o := range objs.Services {
		if err := add(o); err != nil {
			return err
		}
	}
	for _, o := range objs.EndpointSlices {
		if err := add(o); err != nil {
			return err
		}
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// WriteObjectsKubectl writes Objects as `kubectl get
// services,endpointslices -A -o json` prints them: keys sorted, four-space
// indentation (76 MB at 5,000 Services × 20 endpoints).
func (c Cluster) WriteObjectsKubectl(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p("{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n")
	sep := ""
	for i := 0; i < c.Services; i++ {
		p(kubectlService, sep, c.name(i), 1000+i, uid(1, i), c.clusterIP(i))
		sep = ",\n"
	}
	for i := 0; i < c.Services; i++ {
		c.writeSliceKubectl(p, sep, i)
	}
	p("\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
	return bw.Flush()
}

// writeSliceKubectl writes Service i's EndpointSlice, its endpoints
// between the slice's head and tail (keys sorted: "endpoints" comes
// before "kind" and "metadata").
func (c Cluster) writeSliceKubectl(p func(format string, args ...any), sep string, i int) {
	p(kubectlSliceHead, sep)
	for j := 0; j < c.Endpoints; j++ {
		comma := ","
		if j == c.Endpoints-1 {
			comma = ""
		}
		p(kubectlEndpoint, c.podIP(i, j), c.nodeOf(i, j), c.podName(i, j), uid(3, i*c.Endpoints+j), comma)
	}
	p(kubectlSliceTail, c.name(i), uid(1, i), 20000+i, uid(2, i))
}

// The objects as kubectl prints them, verb arguments in order. A
// Service: separator, name, resourceVersion, UID, cluster IP.
const kubectlService = `%s        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "creationTimestamp": "2026-11-29T06:00:00Z",
                "labels": {
                    "app": "%[2]s"
                },
                "name": "%[2]s",
                "namespace": "bench",
                "resourceVersion": "%[3]d",
                "uid": "%[4]s"
            },
            "spec": {
                "clusterIP": "%[5]s",
                "clusterIPs": [
                    "%[5]s"
                ],
                "internalTrafficPolicy": "Cluster",
                "ipFamilies": [
                    "IPv4"
                ],
                "ipFamilyPolicy": "SingleStack",
                "ports": [
                    {
                        "name": "http",
                        "port": 80,
                        "protocol": "TCP",
                        "targetPort": 8080
                    }
                ],
                "selector": {
                    "app": "%[2]s"
                },
                "sessionAffinity": "None",
                "type": "ClusterIP"
            },
            "status": {
                "loadBalancer": {}
            }
        }`

// An EndpointSlice's head: separator.
const kubectlSliceHead = `%s        {
            "addressType": "IPv4",
            "apiVersion": "discovery.k8s.io/v1",
            "endpoints": [
`

// One endpoint: IP, node, pod name, pod UID, "," unless the last.
const kubectlEndpoint = `                {
                    "addresses": [
                        "%s"
                    ],
                    "conditions": {
                        "ready": true,
                        "serving": true,
                        "terminating": false
                    },
                    "nodeName": "%s",
                    "targetRef": {
                        "kind": "Pod",
                        "name": "%s",
                        "namespace": "bench",
                        "uid": "%s"
                    }
                }%s
`

// An EndpointSlice's tail: Service name, Service UID, resourceVersion,
// UID.
const kubectlSliceTail = `            ],
            "kind": "EndpointSlice",
            "metadata": {
                "annotations": {
                    "endpoints.kubernetes.io/last-change-trigger-time": "2026-11-29T06:00:00Z"
                },
                "creationTimestamp": "2026-11-29T06:00:00Z",
                "generateName": "%[1]s-",
                "generation": 1,
                "labels": {
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                    "kubernetes.io/service-name": "%[1]s"
                },
                "name": "%[1]s-abcde",
                "namespace": "bench",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "blockOwnerDeletion": true,
                        "controller": true,
                        "kind": "Service",
                        "name": "%[1]s",
                        "uid": "%[2]s"
                    }
                ],
                "resourceVersion": "%[3]d",
                "uid": "%[4]s"
            },
            "ports": [
                {
                    "name": "http",
                    "port": 8080,
                    "protocol": "TCP"
                }
            ]
        }`
