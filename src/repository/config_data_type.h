// Conversions between Harrier's DataType (harrier/data_type.h) and the model config's
// inference::DataType enum. TYPE_STRING is BYTES.
#pragma once

#include "harrier/data_type.h"
#include "repository/model_config.pb.h"

namespace harrier {

// kInvalid for TYPE_INVALID and for numbers outside the enum.
DataType FromConfigType(inference::DataType type);

// TYPE_INVALID for DataType::kInvalid.
inference::DataType ToConfigType(DataType type);

}  // namespace harrier
