/* Coordinated write phases (coord.hpp): the engine's end of the line protocol with the driver's coordinator.
 * Requests carry the simulated time last: `INFORM <job> <phase> <bytes> <now>`, `RELEASE <job> <bytes> <now>`,
 * `DONE <job> <now>`; each is answered `WAITING <job>...`, the jobs that must not write now. Actors run one at a
 * time, so a request blocks the whole simulation until it is answered: no simulated time passes in a decision. */
#include "coord.hpp"

#include <cassert>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ioloom_sim {

namespace {

struct Phase {
    int job = 0, index = 0; /* the job's index-th phase: its writes after its index-th barrier, or so numbered */
    uint64_t bytes = 0, left = 0;
    bool announced = false;
};

struct Coordination {
    const Input *in = nullptr;
    FILE *requests = nullptr, *replies = nullptr;
    std::vector<int> phase_of; /* per operation: its phase, -1 for anything but a write */
    std::vector<Phase> phases;
    std::vector<char> waiting; /* per job: told not to write */
    sg4::MutexPtr mutex;
    sg4::ConditionVariablePtr changed;
};

Coordination *coordination = nullptr; /* null: coordination is off */

/* Per operation, the phase the driver gave it (parameter coord_phases: a file descriptor of one int32 per
 * operation, -1 for none), else the barriers its rank passed before it. */
std::vector<int32_t> given_phases(const Input &in) {
    std::vector<int32_t> given;
    if (!in.param.count("coord_phases")) return given;
    FILE *f = fdopen(static_cast<int>(in.get("coord_phases")), "rb");
    given.resize(in.ops.size());
    bool whole = f && std::fread(given.data(), sizeof(int32_t), given.size(), f) == given.size();
    if (f) std::fclose(f);
    if (!whole) throw std::runtime_error("coord_phases does not hold one phase per operation");
    return given;
}

/* Every write's phase: (job, its phase as given, else the barriers its rank passed before it); a phase's bytes are
 * all its ranks' writes. */
void find_phases(Coordination &c) {
    std::map<std::pair<int, int>, int> barriers, index;
    std::vector<int32_t> given = given_phases(*c.in);
    c.phase_of.assign(c.in->ops.size(), -1);
    for (size_t i = 0; i < c.in->ops.size(); i++) {
        const Op &op = c.in->ops[i];
        int &passed = barriers[{op.job, op.rank}];
        if (op.kind == OP_BARRIER) passed++;
        int number = given.empty() ? passed : given[i];
        if (op.kind != OP_WRITE || number < 0) continue;
        auto found = index.emplace(std::make_pair(op.job, number), static_cast<int>(c.phases.size()));
        if (found.second) c.phases.push_back(Phase{op.job, number});
        Phase &p = c.phases[static_cast<size_t>(found.first->second)];
        p.bytes += static_cast<uint64_t>(op.length);
        p.left = p.bytes;
        c.phase_of[i] = found.first->second;
    }
}

/* Sends one request, reads its answer and wakes the waiting ranks if it changed who must wait. */
void ask(Coordination &c, const std::string &request) {
    std::fprintf(c.requests, "%s %.9f\n", request.c_str(), sg4::Engine::get_clock());
    std::fflush(c.requests);
    char line[65536];
    if (!std::fgets(line, sizeof line, c.replies)) throw std::runtime_error("the coordinator (the driver) went away");
    std::istringstream words(line);
    std::string head;
    words >> head;
    if (head != "WAITING") throw std::runtime_error(std::string("the coordinator answered: ") + line);
    std::vector<char> waiting(c.in->jobs.size(), 0);
    for (int job; words >> job;)
        if (job >= 0 && static_cast<size_t>(job) < waiting.size()) waiting[static_cast<size_t>(job)] = 1;
    if (waiting == c.waiting) return; /* no simcall: the ranks interleave as they would uncoordinated */
    c.waiting = waiting;
    c.changed->notify_all();
}

Phase *phase_of(size_t op) {
    if (!coordination || coordination->phase_of[op] < 0) return nullptr;
    return &coordination->phases[static_cast<size_t>(coordination->phase_of[op])];
}

} // namespace

void start_coordination(const Input &in) {
    if (!in.param.count("coord_requests")) return;
    static Coordination c;
    c.in = &in;
    c.requests = fdopen(static_cast<int>(in.get("coord_requests")), "w");
    c.replies = fdopen(static_cast<int>(in.get("coord_replies")), "r");
    if (!c.requests || !c.replies) throw std::runtime_error("cannot open the coordinator's pipe");
    find_phases(c);
    c.waiting.assign(in.jobs.size(), 0);
    c.mutex = sg4::Mutex::create();
    c.changed = sg4::ConditionVariable::create();
    coordination = &c;
}

void coordinate_before_write(size_t op) {
    Phase *p = phase_of(op);
    if (!p) return;
    Coordination &c = *coordination;
    if (!p->announced) {
        p->announced = true;
        ask(c, "INFORM " + std::to_string(p->job) + " " + std::to_string(p->index) + " " + std::to_string(p->bytes));
    }
    if (!c.waiting[static_cast<size_t>(p->job)]) return; /* no simcall: the ranks interleave as uncoordinated */
    std::unique_lock<sg4::Mutex> lock(*c.mutex);
    while (c.waiting[static_cast<size_t>(p->job)]) c.changed->wait(lock);
}

void coordinate_after_write(size_t op) {
    Phase *p = phase_of(op);
    if (!p) return;
    auto n = static_cast<uint64_t>(coordination->in->ops[op].length);
    assert(n <= p->left && "a phase's writes add up to its bytes");
    p->left -= n;
    ask(*coordination, "RELEASE " + std::to_string(p->job) + " " + std::to_string(n));
    if (p->left == 0) ask(*coordination, "DONE " + std::to_string(p->job));
}

} // namespace ioloom_sim
