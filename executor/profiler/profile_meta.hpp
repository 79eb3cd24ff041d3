// profile_meta.hpp: the provenance a measured profile records about the machine that measured it.
#pragma once

#include <string>

#include "sim/cost/profile.hpp"

namespace domino::prof {

// Provenance for the profile header: hostname, CPU model and cores, load average; date; versions; flags.
ProfileMetadata machine_metadata(const std::string& backend);
// The 1, 5 and 15-minute load averages as text.
std::string load_average();

}  // namespace domino::prof
