// optimizer_settings.hpp: the optimizer's hyper-parameters, the one definition every backend reads.
#pragma once

namespace domino {

struct OptimizerHyper {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f, momentum = 0.9f;
};

}  // namespace domino
