// informer: the client-go anchor of test/bench/anchors.py (issue 10).
//
// Measures how long a client-go SharedInformerFactory pod informer (all
// namespaces, no resync) takes from Start to HasSynced, i.e. until the
// reflector's initial LIST (resourceVersion=0, served whole from the watch
// cache) has been decoded, queued through the DeltaFIFO and stored in the
// indexer.  HasSynced is polled every millisecond (cache.WaitForCacheSync
// polls every 100 ms, which would round the figure up).  Prints one JSON
// line {"seconds", "objects", "content_type", "gzip", "heap_mb"} and exits;
// peak RSS and CPU time are measured by the harness (wait4 on this process).
//
// Built by anchors.py in GOPATH mode against the vendored client-go of the
// Kubernetes 1.20 source tree test/k8s/build.sh unpacks (nothing downloaded).
//
// With -lag NAMESPACE it is instead the client-go side of evreal.py's lag
// measurement: a ConfigMap informer on that namespace whose UpdateFunc
// records, for every update it is handed (after the reflector, the
// DeltaFIFO and the indexer, where a controller's handler would run), the
// object's resourceVersion and the time (Unix ns).  It prints "synced" once
// HasSynced, then, when its stdin closes, one line "RV NS" per update and
// exits.
//
// usage: informer -kubeconfig FILE [-protobuf] [-gzip=false] [-lag NAMESPACE]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type received struct {
	rv string
	at int64
}

// lag: the -lag mode (see above)
func lag(client kubernetes.Interface, namespace string) {
	var mu sync.Mutex
	got := make([]received, 0, 1<<16)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().ConfigMaps().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) {
			at := time.Now().UnixNano()
			if cm, ok := obj.(*v1.ConfigMap); ok {
				mu.Lock()
				got = append(got, received{cm.ResourceVersion, at})
				mu.Unlock()
			}
		},
	})
	stop := make(chan struct{})
	factory.Start(stop)
	for !inf.HasSynced() {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("synced")
	io.Copy(io.Discard, os.Stdin)
	close(stop)
	mu.Lock()
	w := bufio.NewWriter(os.Stdout)
	for _, r := range got {
		fmt.Fprintf(w, "%s %d\n", r.rv, r.at)
	}
	w.Flush()
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	protobuf := flag.Bool("protobuf", false, "ask for application/vnd.kubernetes.protobuf")
	gzip := flag.Bool("gzip", true, "accept gzip responses (client-go's default)")
	timeout := flag.Duration("timeout", 15*time.Minute, "give up after this long")
	lagNamespace := flag.String("lag", "", "record ConfigMap updates in this namespace (see above)")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "informer:", err)
		os.Exit(1)
	}
	config.QPS, config.Burst = 1000, 1000
	config.DisableCompression = !*gzip
	ctype := "application/json"
	if *protobuf {
		ctype = "application/vnd.kubernetes.protobuf"
		config.ContentType = ctype
		config.AcceptContentTypes = ctype + ",application/json"
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "informer:", err)
		os.Exit(1)
	}

	if *lagNamespace != "" {
		lag(client, *lagNamespace)
		return
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	stop := make(chan struct{})
	t0 := time.Now()
	factory.Start(stop)
	deadline := t0.Add(*timeout)
	for !inf.HasSynced() {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "informer: not synced after", *timeout)
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(t0).Seconds()
	n := len(inf.GetStore().ListKeys())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	close(stop)
	out, _ := json.Marshal(map[string]interface{}{
		"seconds": elapsed, "objects": n, "content_type": ctype, "gzip": *gzip,
		"heap_mb": float64(ms.HeapInuse) / (1 << 20),
	})
	fmt.Println(string(out))
}
