/* graphs.h -- CUDA graphs' memory nodes, from their making to each launch.
 *
 * An allocation node (a stream-ordered allocation on a captured stream, or
 * one added by hand: cuGraphAddMemAllocNode, cuGraphAddNode) has an
 * address from the start but no memory until its graph is launched: it is
 * noted here with the stack of the call that made it, and recorded only
 * by each launch (kind VT_KIND_GRAPH, or the host's kind where a driver
 * allows a node there). A launch allocates every allocation node whose
 * memory is not in use, then frees those the graph frees, then frees what
 * its free nodes of other graphs' allocations free; memory a launch leaves
 * in use is freed by a free outside the graph (or by the next launch of an
 * executable graph instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH).
 * A graph never launched holds nothing. Nodes are kept by graph: a capture
 * asks the driver which graph it is capturing into
 * (cuStreamGetCaptureInfo_v2), so that streams joined to a capture and the
 * per-thread default stream of each thread add to the right one. A graph
 * with memory nodes cannot be cloned nor lose nodes (cuda.h), exec updates
 * cannot change memory nodes, and it can be a child only when moved into
 * its parent, whose nodes it then adds to. */
#ifndef VT_INTERPOSE_GRAPHS_H
#define VT_INTERPOSE_GRAPHS_H

#include <stdint.h>

#include "../tracker/tracker.h"

/* Allocation node `a` (address, bytes, api, stack, device, kind) of graph
 * `graph` (or of the capture of a stream, keyed by the stream, where the
 * driver cannot say the graph). */
void vt_graph_node_add(void *graph, const struct vt_alloc *a);

/* A free node of `address` in `graph`: of one of its own allocation nodes
 * (freed within each launch), or of another graph's allocation (freed at
 * each launch of this graph). */
void vt_graph_free_node(void *graph, uint64_t address);

/* Whether `address` is a graph allocation's: an allocation node's of any
 * graph known, or memory a launch left in use (kind graph; its graph may
 * be gone). A free of it on a captured stream is a free node, not a free
 * now. */
int vt_graph_allocation(uint64_t address);

/* A capture of `stream` began (the stream is the key where the driver
 * cannot say the graph): what an earlier one left under it is dropped. */
void vt_graph_capture_begins(void *stream);

/* A capture into `key` (the graph the driver said, or the stream) ended:
 * with graph `graph` when `ok`, its nodes then the graph's; else the
 * capture's nodes are dropped. */
void vt_graph_capture_ended(void *key, void *graph, int ok);

/* Graph `child` was moved into graph `parent` (a child graph node that
 * owns it): its memory nodes are the parent's. */
void vt_graph_moved(void *child, void *parent);

/* Graph `graph` was instantiated as `exec` with `flags`
 * (CUDA_GRAPH_INSTANTIATE_FLAG_*). */
void vt_graph_instantiated(void *graph, void *exec, unsigned long long flags);

/* What a launch of `exec` allocates, by device (need[d]): the bytes of the
 * allocation nodes it gives memory, the most the launch can take (`net`:
 * less what it frees first, the memory auto-free takes back from the last
 * launch). Whether `exec` is known. */
int vt_graph_launch_needs(void *exec, int net, uint64_t need[VT_MAX_DEVICES]);

/* A graph was made (cuGraphCreate, or a capture began into a new one): a
 * list left under its handle by a graph the driver destroyed on its own
 * (an invalidated capture, a context destroyed) is dropped. */
void vt_graph_made(void *graph);

/* Whether `graph` has memory nodes known. */
int vt_graph_known(void *graph);

/* Executable graph `exec` was launched: its nodes' records made and freed
 * as above; `record` makes a record (the hook's, with device facts). */
void vt_graph_launched(void *exec, void (*record)(const struct vt_alloc *a));

/* A graph or an executable graph was destroyed. */
void vt_graph_dropped(void *graph_or_exec);

/* Around fork: the tables' lock held by the forking thread (so that the
 * child finds them whole), given back in the parent. */
void vt_graphs_fork_prepare(void);
void vt_graphs_fork_parent(void);

/* After fork, in the child (the lock given back first, as in the parent):
 * every graph forgotten (their stacks were the parent's; a forked child
 * cannot use the driver). */
void vt_graphs_reset_child(void);

#endif
