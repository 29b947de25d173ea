/* ioloom-sim INPUT [--cfg=...]: runs one simulation described by the driver's input file (docs/sim.md) and
 * writes each operation's start and end times and each RPC's transfer to the files the input names; prints one
 * summary line. Exit 1 with one line on stderr for a bad input, 3 when the simulated time budget ran out. */
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <sys/resource.h>

#include "coord.hpp"
#include "sim.hpp"

using namespace ioloom_sim;

template <class T> static void write_all(const std::string &path, const std::vector<T> &v) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char *>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
    if (!f) throw std::runtime_error("cannot write " + path);
}

/* Writes each operation's times and each flow, and prints the summary line: the simulated time is the clock when
 * the last rank ended and the write-back caches drained; the process's CPU time and peak resident size. */
static void report(const Input &in, const Storage &storage, const std::vector<double> &times, bool finished,
                   std::chrono::steady_clock::time_point wall) {
    write_all(in.times_path, times);
    write_all(in.pieces_path, storage.pieces);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
    struct rusage use;
    getrusage(RUSAGE_SELF, &use);
    double cpu = static_cast<double>(use.ru_utime.tv_sec + use.ru_stime.tv_sec) +
                 static_cast<double>(use.ru_utime.tv_usec + use.ru_stime.tv_usec) / 1e6;
    std::printf("ioloom-sim 1 finished %d simulated_time %.9g operations %zu transfers %zu wall_seconds %.3f "
                "cpu_seconds %.3f peak_rss_kib %ld\n",
                finished, sg4::Engine::get_clock(), in.ops.size(), storage.pieces.size(), seconds, cpu, use.ru_maxrss);
    std::fflush(stdout);
}

/* The simulation ends with the last rank actor (the daemon below does not keep it alive, nor do periodic load
 * profiles, which run_until would follow to its date). At the simulated-time budget, the daemon reports what
 * was measured so far and exits 3: ranks still inside transfers are not unwound. */
static int simulate(sg4::Engine &engine, const Input &in) {
    auto wall = std::chrono::steady_clock::now();
    Platform platform = build_platform(in);
    Storage storage(in, platform);
    std::vector<double> times(2 * in.ops.size(), -1.0);
    start_coordination(in);
    start_ranks(in, platform, storage, times);
    double budget = in.get("time_budget");
    sg4::Actor::create("budget", platform.mds, [&] {
        sg4::this_actor::sleep_until(budget);
        report(in, storage, times, false, wall);
        std::_Exit(3);
    })->daemonize();
    engine.run();
    report(in, storage, times, true, wall);
    return 0;
}

/* Storage requests are not TCP streams: plain max-min sharing (CM02) with the latencies as given, no
 * acknowledgement cross-traffic and no TCP window bound. SimGrid's default (LV08) multiplies latencies by 13
 * and caps rates by window / round trip, which makes a 1 MiB RPC to a 0.5 ms target pay 6.7 ms. */
static void storage_network_model() {
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/crosstraffic:0");
    sg4::Engine::set_config("network/TCP-gamma:0");
}

int main(int argc, char **argv) {
    sg4::Engine engine(&argc, argv);
    storage_network_model();
    if (argc != 2) {
        std::fprintf(stderr, "usage: ioloom-sim INPUT (the driver writes it: `ioloom sim run`)\n");
        return 1;
    }
    try {
        return simulate(engine, read_input(argv[1]));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ioloom-sim: %s\n", e.what());
        return 1;
    }
}
