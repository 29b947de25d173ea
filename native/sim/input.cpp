/* Reads the driver's input: a text file of parameters, layouts, jobs and profiles (docs/sim.md, "Engine
 * input"), and the binary file of operations it names. Any malformed line is an error naming the line: the
 * driver validated the user's platform and workload already, so this only guards the interface. */
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sim.hpp"

namespace ioloom_sim {

static const char *const MAGIC = "ioloom-sim-input 1";

double Input::get(const std::string &name) const {
    auto it = param.find(name);
    if (it == param.end()) throw std::runtime_error("engine input lacks parameter " + name);
    return it->second;
}

static void read_layout(std::istringstream &line, Input &in) {
    int id;
    Layout l;
    line >> id >> l.stripe_size;
    for (int t; line >> t;) l.targets.push_back(t);
    if (l.targets.empty() || l.stripe_size == 0) throw std::runtime_error("layout of file " + std::to_string(id));
    in.files[id] = l;
}

static void read_profile(std::istringstream &line, Input &in) {
    int target;
    line >> target;
    auto &steps = in.profiles[target];
    for (double t, ratio; line >> t >> ratio;) {
        if (ratio <= 0 || ratio > 1 || (!steps.empty() && t <= steps.back().first))
            throw std::runtime_error("profile of target " + std::to_string(target) +
                                     ": times must increase, ratios be in (0, 1]");
        steps.emplace_back(t, ratio);
    }
}

static std::vector<Op> read_ops(const std::string &path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw std::runtime_error("cannot read operations file " + path);
    auto bytes = static_cast<size_t>(f.tellg());
    if (bytes % sizeof(Op)) throw std::runtime_error(path + " is not a whole number of operation records");
    std::vector<Op> ops(bytes / sizeof(Op));
    f.seekg(0);
    f.read(reinterpret_cast<char *>(ops.data()), static_cast<std::streamsize>(bytes));
    return ops;
}

static void read_line(const std::string &text, Input &in) {
    std::istringstream line(text);
    std::string key;
    line >> key;
    if (key == "param") {
        std::string name;
        double value;
        line >> name >> value;
        in.param[name] = value;
    } else if (key == "file")
        read_layout(line, in);
    else if (key == "job") {
        Job j;
        line >> j.start >> j.nranks >> j.ranks_per_node >> j.first_node;
        in.jobs.push_back(j);
    } else if (key == "profile")
        read_profile(line, in);
    else if (key == "profile_period")
        line >> in.profile_period;
    else if (key == "ops")
        line >> in.ops_path;
    else if (key == "times")
        line >> in.times_path;
    else if (key == "pieces")
        line >> in.pieces_path;
    else if (!key.empty())
        throw std::runtime_error("unknown line: " + text);
    if (line.fail() && !line.eof()) throw std::runtime_error("malformed line: " + text);
}

Input read_input(const std::string &path) {
    std::ifstream f(path);
    std::string text;
    if (!f || !std::getline(f, text) || text != MAGIC) throw std::runtime_error(path + " is not ioloom-sim input");
    Input in;
    while (std::getline(f, text)) read_line(text, in);
    in.ops = read_ops(in.ops_path);
    return in;
}

} // namespace ioloom_sim
