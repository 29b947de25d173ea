/* Builds the simulated machine as one SimGrid star zone with separate up and down routes:
 *   client node i:  up [nic_up(i), uplink_up(g), pod_up(q)]   down [pod_down(q), uplink_down(g), nic_down(i)]
 *                   (g: its switch group or fat tree leaf, q: its pod; no such link when the platform sets none)
 *   target t:       up [disk_read(t), oss_up(o), router_up(r)]   down [router_down(r), oss_down(o), disk_write(t)]
 *                   (o: its server, r = o mod routers: the LNet router in front of it; none without routers)
 * A stripe piece written by node i to target t is then one flow through nic_up, uplink_up, oss_down and
 * disk_write: the flow-level solver shares each of those (max-min) exactly as separate pipelined transfers
 * would be shared, at one activity per piece. A target's disk links carry its per-request latency, its seek
 * penalty (capacity falls with concurrent streams) and its background-load profile. */
#include <algorithm>
#include <cmath>
#include <sstream>

#include <simgrid/kernel/ProfileBuilder.hpp>

#include "sim.hpp"

namespace ioloom_sim {

using LinkList = std::vector<sg4::LinkInRoute>;

static sg4::Link *link(sg4::NetZone *zone, const std::string &name, double bandwidth, double latency) {
    return zone->create_link(name, bandwidth)->set_latency(latency)->seal();
}

static void route(sg4::NetZone *zone, sg4::Host *host, const LinkList &up, const LinkList &down) {
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, up, false);
    zone->add_route(nullptr, host->get_netpoint(), nullptr, nullptr, down, false);
}

/* Capacity shared by n concurrent streams on a disk that pays `seek` of its bandwidth per extra stream. */
static sg4::Link *disk_link(sg4::NetZone *zone, const std::string &name, double bandwidth, const Input &in) {
    sg4::Link *l = zone->create_link(name, bandwidth)->set_latency(in.get("target_latency"));
    double seek = in.get("seek_penalty");
    if (seek > 0)
        l->set_sharing_policy(sg4::Link::SharingPolicy::NONLINEAR,
                              [seek](double capacity, int n) { return capacity / (1 + seek * std::max(0, n - 1)); });
    return l;
}

/* A link's bandwidth profile holds bytes per second (SimGrid 3.32 sets the link's bandwidth to each value), so
 * the input's capacity ratios are scaled by the link's own bandwidth here. */
static void add_profile(sg4::Link *l, const Input &in, int target, const char *direction) {
    auto it = in.profiles.find(target);
    if (it == in.profiles.end()) return;
    std::ostringstream text;
    text.precision(17);
    for (auto [time, ratio] : it->second) text << time << " " << ratio * l->get_bandwidth() << "\n";
    std::string name = "load-" + std::to_string(target) + direction;
    l->set_bandwidth_profile(
        simgrid::kernel::profile::ProfileBuilder::from_string(name, text.str(), in.profile_period));
}

/* A node's core computes `copy_bandwidth` flops per second: a rank's copy of n bytes into the cache is n flops
 * on its node (Storage::cache_write), so copies beyond the cores share them. */
static double copy_speed(const Input &in) { return in.get("copy_bandwidth") > 0 ? in.get("copy_bandwidth") : 1e9; }

/* The fraction of min(n, cores) cores' copy speed that n copies running at once move together: 1 for one copy,
 * falling linearly to copy_efficiency with as many copies as cores (they share the node's memory bus and page
 * allocator), then to oversubscribed_efficiency with twice as many (time-sliced on the cores: switches, caches
 * refilled), held beyond. */
static double copy_efficiency(double all, double over, int n, int cores) {
    if (n <= 1) return 1;
    if (n <= cores) return 1 + (all - 1) * (n - 1) / (cores - 1);
    if (n < 2 * cores) return all + (over - all) * (n - cores) / cores;
    return over;
}

/* A host whose cores the node's copies share: n copies at once get min(n, cores) cores' speed times their
 * efficiency (SimGrid's non-linear CPU sharing; each copy still runs on at most one core). */
static sg4::Host *copy_host(sg4::NetZone *zone, const Input &in, const std::string &name, double speed, int cores) {
    sg4::Host *h = zone->create_host(name, speed)->set_core_count(cores);
    double all = in.get("copy_efficiency"), over = in.get("oversubscribed_efficiency");
    if (all < 1 || over < 1)
        h->set_sharing_policy(sg4::Host::SharingPolicy::NONLINEAR, [all, over, cores](double capacity, int n) {
            return capacity / cores * std::min(n, cores) * copy_efficiency(all, over, n, cores);
        });
    return h->seal();
}

/* The host a node's job copies on past its burst: the machine's scheduler shares the cores among the sessions
 * running (Linux's autogroups: a session's processes together get one share), so the job's copies together get
 * share = cores / (cpu_load + 1) cores, each on at most one: ceil(share) cores dividing that capacity. */
static sg4::Host *add_job_cores(sg4::NetZone *zone, const Input &in, const std::string &node, int cores) {
    double share = cores / (1 + in.get("cpu_load"));
    int count = static_cast<int>(std::ceil(share));
    return copy_host(zone, in, node + "-job", copy_speed(in) * share / count, count);
}

/* One level of switches above the nodes: a link per direction for each `per` consecutive nodes (none when the
 * level has no bandwidth). */
struct Level {
    std::vector<sg4::Link *> up, down;
    int per = 1;
};

static Level level(sg4::NetZone *zone, const std::string &name, int members, int per, double bandwidth) {
    Level l;
    l.per = std::max(1, per);
    for (int g = 0; bandwidth > 0 && g * l.per < members; g++) {
        l.up.push_back(link(zone, name + "_up-" + std::to_string(g), bandwidth, 0));
        l.down.push_back(link(zone, name + "_down-" + std::to_string(g), bandwidth, 0));
    }
    return l;
}

/* Member i's route through one level: up it at the end of `up`, down it at the start of `down` (none when the
 * level has no links). */
static void climb(const Level &l, int i, LinkList &up, LinkList &down) {
    if (l.up.empty()) return;
    up.emplace_back(l.up[static_cast<size_t>(i / l.per)]);
    down.insert(down.begin(), sg4::LinkInRoute(l.down[static_cast<size_t>(i / l.per)]));
}

static void add_nodes(sg4::NetZone *zone, const Input &in, Platform &p) {
    int nodes = static_cast<int>(in.get("nodes"));
    int cores = std::max(1, static_cast<int>(in.get("cores")));
    double nic = in.get("nic_bandwidth"), lat = in.get("nic_latency");
    std::vector<Level> levels{
        level(zone, "uplink", nodes, static_cast<int>(in.get("nodes_per_group")), in.get("uplink_bandwidth")),
        level(zone, "pod", nodes, static_cast<int>(in.get("nodes_per_pod")), in.get("pod_uplink_bandwidth"))};
    for (const Level &l : levels)
        if (!l.up.empty()) p.below.push_back({l.per, {}});
    for (int i = 0; i < nodes; i++) {
        std::string n = std::to_string(i);
        sg4::Host *h = copy_host(zone, in, "node-" + n, copy_speed(in), cores);
        p.job_cores.push_back(add_job_cores(zone, in, "node-" + n, cores));
        LinkList to_network{sg4::LinkInRoute(link(zone, "nic_up-" + n, nic, lat))};
        LinkList from_network{sg4::LinkInRoute(link(zone, "nic_down-" + n, nic, lat))};
        size_t depth = 0;
        for (const Level &l : levels) {
            if (l.up.empty()) continue;
            sg4::Host *below = zone->create_host("node-" + n + "-below-" + std::to_string(depth), 1e9)->seal();
            route(zone, below, to_network, from_network); /* the levels climbed so far, not this one */
            p.below[depth++].nodes.push_back(below);
            climb(l, i, to_network, from_network);
        }
        route(zone, h, to_network, from_network);
        p.nodes.push_back(h);
    }
}

static void add_targets(sg4::NetZone *zone, const Input &in, Platform &p) {
    int targets = static_cast<int>(in.get("targets")), servers = static_cast<int>(in.get("servers"));
    double oss = in.get("server_bandwidth"), lat = in.get("server_latency");
    std::vector<sg4::Link *> up, down;
    for (int o = 0; o < servers; o++) {
        up.push_back(link(zone, "oss_up-" + std::to_string(o), oss, lat));
        down.push_back(link(zone, "oss_down-" + std::to_string(o), oss, lat));
    }
    /* LNet routers between the clients' fabric and the servers: server o's traffic through router o mod R */
    Level routers = level(zone, "router", static_cast<int>(in.get("routers")), 1,
                          in.get("routers") > 0 ? in.get("router_bandwidth") : 0);
    int per_server = (targets + servers - 1) / servers; /* Lustre numbers a server's targets contiguously */
    for (int t = 0; t < targets; t++) {
        std::string n = std::to_string(t);
        sg4::Link *read = disk_link(zone, "disk_read-" + n, in.get("read_bandwidth"), in);
        sg4::Link *write = disk_link(zone, "disk_write-" + n, in.get("write_bandwidth"), in);
        add_profile(read, in, t, "r");
        add_profile(write, in, t, "w");
        read->seal();
        write->seal();
        sg4::Host *h = zone->create_host("target-" + n, 1e9)->seal();
        int server = t / per_server;
        LinkList to_network{sg4::LinkInRoute(read), sg4::LinkInRoute(up[static_cast<size_t>(server)])};
        LinkList from_network{sg4::LinkInRoute(down[static_cast<size_t>(server)]), sg4::LinkInRoute(write)};
        if (!routers.up.empty()) climb(routers, server % static_cast<int>(routers.up.size()), to_network, from_network);
        route(zone, h, to_network, from_network);
        p.targets.push_back(h);
    }
}

Platform build_platform(const Input &in) {
    Platform p;
    sg4::NetZone *zone = sg4::create_star_zone("machine");
    add_nodes(zone, in, p);
    add_targets(zone, in, p);
    p.mds = zone->create_host("mds", 1e9)->seal();
    zone->seal();
    return p;
}

} // namespace ioloom_sim
