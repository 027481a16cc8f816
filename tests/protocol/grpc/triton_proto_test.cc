// Harrier's gRPC messages are Triton's on the wire: Triton's own clients (tritonclient,
// perf_analyzer) compile Triton's grpc_service.proto and model_config.proto, not Harrier's, so
// every field they send or read must have Triton's number, type and cardinality here, and every
// method Triton's name and streaming shape (README.md: "Triton's clients ... connect
// unmodified"). The tables are Triton's definitions (triton-inference-server/common,
// protobuf/), written out by hand: a field renumbered or retyped in Harrier's .proto fails here,
// where every other gRPC test, built from Harrier's own .proto, would still pass.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/grpc/grpc_service.pb.h"
#include "repository/model_config.pb.h"

namespace harrier {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

constexpr bool kRepeated = true;
constexpr bool kSingle = false;

struct TritonField {
  const char* message;  // full name
  const char* field;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
  const char* type_name = "";  // message or enum fields: the full name of their type
};

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kBytes = FieldDescriptor::TYPE_BYTES;
constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kInt32 = FieldDescriptor::TYPE_INT32;
constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
constexpr auto kUint32 = FieldDescriptor::TYPE_UINT32;
constexpr auto kUint64 = FieldDescriptor::TYPE_UINT64;
constexpr auto kFloat = FieldDescriptor::TYPE_FLOAT;
constexpr auto kDouble = FieldDescriptor::TYPE_DOUBLE;
constexpr auto kMessage = FieldDescriptor::TYPE_MESSAGE;
constexpr auto kEnum = FieldDescriptor::TYPE_ENUM;

// Maps are repeated messages on the wire (a map entry per key).
const std::vector<TritonField>& GrpcServiceFields() {
  static const std::vector<TritonField> fields = {
      {"inference.ServerLiveResponse", "live", 1, kBool, kSingle},
      {"inference.ServerReadyResponse", "ready", 1, kBool, kSingle},
      {"inference.ModelReadyRequest", "name", 1, kString, kSingle},
      {"inference.ModelReadyRequest", "version", 2, kString, kSingle},
      {"inference.ModelReadyResponse", "ready", 1, kBool, kSingle},
      {"inference.ServerMetadataResponse", "name", 1, kString, kSingle},
      {"inference.ServerMetadataResponse", "version", 2, kString, kSingle},
      {"inference.ServerMetadataResponse", "extensions", 3, kString, kRepeated},
      {"inference.ModelMetadataRequest", "name", 1, kString, kSingle},
      {"inference.ModelMetadataRequest", "version", 2, kString, kSingle},
      {"inference.ModelMetadataResponse.TensorMetadata", "name", 1, kString, kSingle},
      {"inference.ModelMetadataResponse.TensorMetadata", "datatype", 2, kString, kSingle},
      {"inference.ModelMetadataResponse.TensorMetadata", "shape", 3, kInt64, kRepeated},
      {"inference.ModelMetadataResponse", "name", 1, kString, kSingle},
      {"inference.ModelMetadataResponse", "versions", 2, kString, kRepeated},
      {"inference.ModelMetadataResponse", "platform", 3, kString, kSingle},
      {"inference.ModelMetadataResponse", "inputs", 4, kMessage, kRepeated,
       "inference.ModelMetadataResponse.TensorMetadata"},
      {"inference.ModelMetadataResponse", "outputs", 5, kMessage, kRepeated,
       "inference.ModelMetadataResponse.TensorMetadata"},
      {"inference.InferParameter", "bool_param", 1, kBool, kSingle},
      {"inference.InferParameter", "int64_param", 2, kInt64, kSingle},
      {"inference.InferParameter", "string_param", 3, kString, kSingle},
      {"inference.InferParameter", "double_param", 4, kDouble, kSingle},
      {"inference.InferParameter", "uint64_param", 5, kUint64, kSingle},
      {"inference.InferTensorContents", "bool_contents", 1, kBool, kRepeated},
      {"inference.InferTensorContents", "int_contents", 2, kInt32, kRepeated},
      {"inference.InferTensorContents", "int64_contents", 3, kInt64, kRepeated},
      {"inference.InferTensorContents", "uint_contents", 4, kUint32, kRepeated},
      {"inference.InferTensorContents", "uint64_contents", 5, kUint64, kRepeated},
      {"inference.InferTensorContents", "fp32_contents", 6, kFloat, kRepeated},
      {"inference.InferTensorContents", "fp64_contents", 7, kDouble, kRepeated},
      {"inference.InferTensorContents", "bytes_contents", 8, kBytes, kRepeated},
      {"inference.ModelInferRequest.InferInputTensor", "name", 1, kString, kSingle},
      {"inference.ModelInferRequest.InferInputTensor", "datatype", 2, kString, kSingle},
      {"inference.ModelInferRequest.InferInputTensor", "shape", 3, kInt64, kRepeated},
      {"inference.ModelInferRequest.InferInputTensor", "parameters", 4, kMessage, kRepeated},
      {"inference.ModelInferRequest.InferInputTensor", "contents", 5, kMessage, kSingle,
       "inference.InferTensorContents"},
      {"inference.ModelInferRequest.InferRequestedOutputTensor", "name", 1, kString, kSingle},
      {"inference.ModelInferRequest.InferRequestedOutputTensor", "parameters", 2, kMessage,
       kRepeated},
      {"inference.ModelInferRequest", "model_name", 1, kString, kSingle},
      {"inference.ModelInferRequest", "model_version", 2, kString, kSingle},
      {"inference.ModelInferRequest", "id", 3, kString, kSingle},
      {"inference.ModelInferRequest", "parameters", 4, kMessage, kRepeated},
      {"inference.ModelInferRequest", "inputs", 5, kMessage, kRepeated,
       "inference.ModelInferRequest.InferInputTensor"},
      {"inference.ModelInferRequest", "outputs", 6, kMessage, kRepeated,
       "inference.ModelInferRequest.InferRequestedOutputTensor"},
      {"inference.ModelInferRequest", "raw_input_contents", 7, kBytes, kRepeated},
      {"inference.ModelInferResponse.InferOutputTensor", "name", 1, kString, kSingle},
      {"inference.ModelInferResponse.InferOutputTensor", "datatype", 2, kString, kSingle},
      {"inference.ModelInferResponse.InferOutputTensor", "shape", 3, kInt64, kRepeated},
      {"inference.ModelInferResponse.InferOutputTensor", "parameters", 4, kMessage, kRepeated},
      {"inference.ModelInferResponse.InferOutputTensor", "contents", 5, kMessage, kSingle,
       "inference.InferTensorContents"},
      {"inference.ModelInferResponse", "model_name", 1, kString, kSingle},
      {"inference.ModelInferResponse", "model_version", 2, kString, kSingle},
      {"inference.ModelInferResponse", "id", 3, kString, kSingle},
      {"inference.ModelInferResponse", "parameters", 4, kMessage, kRepeated},
      {"inference.ModelInferResponse", "outputs", 5, kMessage, kRepeated,
       "inference.ModelInferResponse.InferOutputTensor"},
      {"inference.ModelInferResponse", "raw_output_contents", 6, kBytes, kRepeated},
      {"inference.ModelStreamInferResponse", "error_message", 1, kString, kSingle},
      {"inference.ModelStreamInferResponse", "infer_response", 2, kMessage, kSingle,
       "inference.ModelInferResponse"},
      {"inference.ModelConfigRequest", "name", 1, kString, kSingle},
      {"inference.ModelConfigRequest", "version", 2, kString, kSingle},
      {"inference.ModelConfigResponse", "config", 1, kMessage, kSingle, "inference.ModelConfig"},
      {"inference.ModelStatisticsRequest", "name", 1, kString, kSingle},
      {"inference.ModelStatisticsRequest", "version", 2, kString, kSingle},
      {"inference.StatisticDuration", "count", 1, kUint64, kSingle},
      {"inference.StatisticDuration", "ns", 2, kUint64, kSingle},
      {"inference.InferStatistics", "success", 1, kMessage, kSingle, "inference.StatisticDuration"},
      {"inference.InferStatistics", "fail", 2, kMessage, kSingle, "inference.StatisticDuration"},
      {"inference.InferStatistics", "queue", 3, kMessage, kSingle, "inference.StatisticDuration"},
      {"inference.InferStatistics", "compute_input", 4, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.InferStatistics", "compute_infer", 5, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.InferStatistics", "compute_output", 6, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.InferStatistics", "cache_hit", 7, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.InferStatistics", "cache_miss", 8, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.InferBatchStatistics", "batch_size", 1, kUint64, kSingle},
      {"inference.InferBatchStatistics", "compute_input", 2, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.InferBatchStatistics", "compute_infer", 3, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.InferBatchStatistics", "compute_output", 4, kMessage, kSingle,
       "inference.StatisticDuration"},
      {"inference.ModelStatistics", "name", 1, kString, kSingle},
      {"inference.ModelStatistics", "version", 2, kString, kSingle},
      {"inference.ModelStatistics", "last_inference", 3, kUint64, kSingle},
      {"inference.ModelStatistics", "inference_count", 4, kUint64, kSingle},
      {"inference.ModelStatistics", "execution_count", 5, kUint64, kSingle},
      {"inference.ModelStatistics", "inference_stats", 6, kMessage, kSingle,
       "inference.InferStatistics"},
      {"inference.ModelStatistics", "batch_stats", 7, kMessage, kRepeated,
       "inference.InferBatchStatistics"},
      {"inference.ModelStatisticsResponse", "model_stats", 1, kMessage, kRepeated,
       "inference.ModelStatistics"},
      {"inference.ModelRepositoryParameter", "bool_param", 1, kBool, kSingle},
      {"inference.ModelRepositoryParameter", "int64_param", 2, kInt64, kSingle},
      {"inference.ModelRepositoryParameter", "string_param", 3, kString, kSingle},
      {"inference.ModelRepositoryParameter", "bytes_param", 4, kBytes, kSingle},
      {"inference.RepositoryIndexRequest", "repository_name", 1, kString, kSingle},
      {"inference.RepositoryIndexRequest", "ready", 2, kBool, kSingle},
      {"inference.RepositoryIndexResponse.ModelIndex", "name", 1, kString, kSingle},
      {"inference.RepositoryIndexResponse.ModelIndex", "version", 2, kString, kSingle},
      {"inference.RepositoryIndexResponse.ModelIndex", "state", 3, kString, kSingle},
      {"inference.RepositoryIndexResponse.ModelIndex", "reason", 4, kString, kSingle},
      {"inference.RepositoryIndexResponse", "models", 1, kMessage, kRepeated,
       "inference.RepositoryIndexResponse.ModelIndex"},
      {"inference.RepositoryModelLoadRequest", "repository_name", 1, kString, kSingle},
      {"inference.RepositoryModelLoadRequest", "model_name", 2, kString, kSingle},
      {"inference.RepositoryModelLoadRequest", "parameters", 3, kMessage, kRepeated},
      {"inference.RepositoryModelUnloadRequest", "repository_name", 1, kString, kSingle},
      {"inference.RepositoryModelUnloadRequest", "model_name", 2, kString, kSingle},
      {"inference.RepositoryModelUnloadRequest", "parameters", 3, kMessage, kRepeated},
      {"inference.SystemSharedMemoryStatusRequest", "name", 1, kString, kSingle},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "name", 1, kString, kSingle},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "key", 2, kString, kSingle},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "offset", 3, kUint64, kSingle},
      {"inference.SystemSharedMemoryStatusResponse.RegionStatus", "byte_size", 4, kUint64, kSingle},
      {"inference.SystemSharedMemoryStatusResponse", "regions", 1, kMessage, kRepeated},
      {"inference.SystemSharedMemoryRegisterRequest", "name", 1, kString, kSingle},
      {"inference.SystemSharedMemoryRegisterRequest", "key", 2, kString, kSingle},
      {"inference.SystemSharedMemoryRegisterRequest", "offset", 3, kUint64, kSingle},
      {"inference.SystemSharedMemoryRegisterRequest", "byte_size", 4, kUint64, kSingle},
      {"inference.SystemSharedMemoryUnregisterRequest", "name", 1, kString, kSingle},
      {"inference.CudaSharedMemoryStatusRequest", "name", 1, kString, kSingle},
      {"inference.CudaSharedMemoryRegisterRequest", "name", 1, kString, kSingle},
      {"inference.CudaSharedMemoryRegisterRequest", "raw_handle", 2, kBytes, kSingle},
      {"inference.CudaSharedMemoryRegisterRequest", "device_id", 3, kInt64, kSingle},
      {"inference.CudaSharedMemoryRegisterRequest", "byte_size", 4, kUint64, kSingle},
      {"inference.CudaSharedMemoryUnregisterRequest", "name", 1, kString, kSingle},
  };
  return fields;
}

// What a client reads from ModelConfig (tritonclient's get_model_config, perf_analyzer's
// parser): model_config.proto's fields that Harrier fills in.
const std::vector<TritonField>& ModelConfigFields() {
  static const std::vector<TritonField> fields = {
      {"inference.ModelConfig", "name", 1, kString, kSingle},
      {"inference.ModelConfig", "platform", 2, kString, kSingle},
      {"inference.ModelConfig", "backend", 17, kString, kSingle},
      {"inference.ModelConfig", "version_policy", 3, kMessage, kSingle,
       "inference.ModelVersionPolicy"},
      {"inference.ModelConfig", "max_batch_size", 4, kInt32, kSingle},
      {"inference.ModelConfig", "input", 5, kMessage, kRepeated, "inference.ModelInput"},
      {"inference.ModelConfig", "output", 6, kMessage, kRepeated, "inference.ModelOutput"},
      {"inference.ModelConfig", "optimization", 12, kMessage, kSingle,
       "inference.ModelOptimizationPolicy"},
      {"inference.ModelConfig", "dynamic_batching", 11, kMessage, kSingle,
       "inference.ModelDynamicBatching"},
      {"inference.ModelConfig", "instance_group", 7, kMessage, kRepeated,
       "inference.ModelInstanceGroup"},
      {"inference.ModelConfig", "default_model_filename", 8, kString, kSingle},
      {"inference.ModelConfig", "parameters", 14, kMessage, kRepeated},
      {"inference.ModelConfig", "model_warmup", 16, kMessage, kRepeated, "inference.ModelWarmup"},
      {"inference.ModelConfig", "model_transaction_policy", 19, kMessage, kSingle,
       "inference.ModelTransactionPolicy"},
      {"inference.ModelConfig", "response_cache", 24, kMessage, kSingle,
       "inference.ModelResponseCache"},
      {"inference.ModelInput", "name", 1, kString, kSingle},
      {"inference.ModelInput", "data_type", 2, kEnum, kSingle, "inference.DataType"},
      {"inference.ModelInput", "format", 3, kEnum, kSingle, "inference.ModelInput.Format"},
      {"inference.ModelInput", "dims", 4, kInt64, kRepeated},
      {"inference.ModelInput", "reshape", 5, kMessage, kSingle, "inference.ModelTensorReshape"},
      {"inference.ModelInput", "is_shape_tensor", 6, kBool, kSingle},
      {"inference.ModelInput", "allow_ragged_batch", 7, kBool, kSingle},
      {"inference.ModelInput", "optional", 8, kBool, kSingle},
      {"inference.ModelOutput", "name", 1, kString, kSingle},
      {"inference.ModelOutput", "data_type", 2, kEnum, kSingle, "inference.DataType"},
      {"inference.ModelOutput", "dims", 3, kInt64, kRepeated},
      {"inference.ModelOutput", "reshape", 5, kMessage, kSingle, "inference.ModelTensorReshape"},
      {"inference.ModelOutput", "label_filename", 4, kString, kSingle},
      {"inference.ModelOutput", "is_shape_tensor", 6, kBool, kSingle},
      {"inference.ModelTensorReshape", "shape", 1, kInt64, kRepeated},
      {"inference.ModelInstanceGroup", "name", 1, kString, kSingle},
      {"inference.ModelInstanceGroup", "kind", 4, kEnum, kSingle,
       "inference.ModelInstanceGroup.Kind"},
      {"inference.ModelInstanceGroup", "count", 2, kInt32, kSingle},
      {"inference.ModelInstanceGroup", "gpus", 3, kInt32, kRepeated},
      {"inference.ModelInstanceGroup", "host_policy", 9, kString, kSingle},
      {"inference.ModelVersionPolicy", "latest", 1, kMessage, kSingle,
       "inference.ModelVersionPolicy.Latest"},
      {"inference.ModelVersionPolicy", "all", 2, kMessage, kSingle,
       "inference.ModelVersionPolicy.All"},
      {"inference.ModelVersionPolicy", "specific", 3, kMessage, kSingle,
       "inference.ModelVersionPolicy.Specific"},
      {"inference.ModelVersionPolicy.Latest", "num_versions", 1, kUint32, kSingle},
      {"inference.ModelVersionPolicy.Specific", "versions", 1, kInt64, kRepeated},
      {"inference.ModelDynamicBatching", "preferred_batch_size", 1, kInt32, kRepeated},
      {"inference.ModelDynamicBatching", "max_queue_delay_microseconds", 2, kUint64, kSingle},
      {"inference.ModelDynamicBatching", "preserve_ordering", 3, kBool, kSingle},
      {"inference.ModelDynamicBatching", "priority_levels", 4, kUint64, kSingle},
      {"inference.ModelDynamicBatching", "default_priority_level", 5, kUint64, kSingle},
      {"inference.ModelDynamicBatching", "default_queue_policy", 6, kMessage, kSingle,
       "inference.ModelQueuePolicy"},
      {"inference.ModelDynamicBatching", "priority_queue_policy", 7, kMessage, kRepeated},
      {"inference.ModelQueuePolicy", "timeout_action", 1, kEnum, kSingle,
       "inference.ModelQueuePolicy.TimeoutAction"},
      {"inference.ModelQueuePolicy", "default_timeout_microseconds", 2, kUint64, kSingle},
      {"inference.ModelQueuePolicy", "allow_timeout_override", 3, kBool, kSingle},
      {"inference.ModelQueuePolicy", "max_queue_size", 4, kUint32, kSingle},
      {"inference.ModelParameter", "string_value", 1, kString, kSingle},
      {"inference.ModelTransactionPolicy", "decoupled", 1, kBool, kSingle},
      {"inference.ModelResponseCache", "enable", 1, kBool, kSingle},
  };
  return fields;
}

void ExpectTritonShape(const std::vector<TritonField>& fields) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  for (const TritonField& t : fields) {
    const std::string what = std::string(t.message) + "." + t.field;
    const Descriptor* message = pool->FindMessageTypeByName(t.message);
    ASSERT_NE(message, nullptr) << t.message << " is missing";
    const FieldDescriptor* field = message->FindFieldByName(t.field);
    ASSERT_NE(field, nullptr) << what << " is missing";
    EXPECT_EQ(field->number(), t.number) << what;
    EXPECT_EQ(field->type(), t.type) << what << ": " << field->type_name();
    EXPECT_EQ(field->is_repeated(), t.repeated) << what;
    if (std::string(t.type_name).empty()) continue;
    const std::string actual = field->message_type() != nullptr ? field->message_type()->full_name()
                               : field->enum_type() != nullptr  ? field->enum_type()->full_name()
                                                                : "";
    EXPECT_EQ(actual, t.type_name) << what;
  }
}

TEST(TritonProtoTest, GrpcServiceMessagesHaveTritonsFieldNumbersAndTypes) {
  ExpectTritonShape(GrpcServiceFields());
}

TEST(TritonProtoTest, ModelConfigHasTritonsFieldNumbersAndTypes) {
  ExpectTritonShape(ModelConfigFields());
}

TEST(TritonProtoTest, EnumsHaveTritonsValues) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  struct Value {
    const char* enum_name;
    const char* name;
    int number;
  };
  const Value values[] = {
      {"inference.DataType", "TYPE_INVALID", 0},
      {"inference.DataType", "TYPE_BOOL", 1},
      {"inference.DataType", "TYPE_UINT8", 2},
      {"inference.DataType", "TYPE_UINT16", 3},
      {"inference.DataType", "TYPE_UINT32", 4},
      {"inference.DataType", "TYPE_UINT64", 5},
      {"inference.DataType", "TYPE_INT8", 6},
      {"inference.DataType", "TYPE_INT16", 7},
      {"inference.DataType", "TYPE_INT32", 8},
      {"inference.DataType", "TYPE_INT64", 9},
      {"inference.DataType", "TYPE_FP16", 10},
      {"inference.DataType", "TYPE_FP32", 11},
      {"inference.DataType", "TYPE_FP64", 12},
      {"inference.DataType", "TYPE_STRING", 13},
      {"inference.DataType", "TYPE_BF16", 14},
      {"inference.ModelInstanceGroup.Kind", "KIND_AUTO", 0},
      {"inference.ModelInstanceGroup.Kind", "KIND_GPU", 1},
      {"inference.ModelInstanceGroup.Kind", "KIND_CPU", 2},
      {"inference.ModelInstanceGroup.Kind", "KIND_MODEL", 3},
      {"inference.ModelInput.Format", "FORMAT_NONE", 0},
      {"inference.ModelInput.Format", "FORMAT_NHWC", 1},
      {"inference.ModelInput.Format", "FORMAT_NCHW", 2},
      {"inference.ModelQueuePolicy.TimeoutAction", "REJECT", 0},
      {"inference.ModelQueuePolicy.TimeoutAction", "DELAY", 1},
  };
  for (const Value& v : values) {
    const auto* type = pool->FindEnumTypeByName(v.enum_name);
    ASSERT_NE(type, nullptr) << v.enum_name;
    const auto* value = type->FindValueByName(v.name);
    ASSERT_NE(value, nullptr) << v.enum_name << "." << v.name;
    EXPECT_EQ(value->number(), v.number) << v.enum_name << "." << v.name;
  }
}

// A client calls "/inference.GRPCInferenceService/<Method>" with Triton's request type and
// streaming shape (the path is these names).
TEST(TritonProtoTest, TheServiceHasTritonsMethods) {
  const auto* service =
      DescriptorPool::generated_pool()->FindServiceByName("inference.GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  struct Method {
    const char* name;
    const char* input;
    const char* output;
    bool streaming;
  };
  const Method methods[] = {
      {"ServerLive", "ServerLiveRequest", "ServerLiveResponse", false},
      {"ServerReady", "ServerReadyRequest", "ServerReadyResponse", false},
      {"ModelReady", "ModelReadyRequest", "ModelReadyResponse", false},
      {"ServerMetadata", "ServerMetadataRequest", "ServerMetadataResponse", false},
      {"ModelMetadata", "ModelMetadataRequest", "ModelMetadataResponse", false},
      {"ModelInfer", "ModelInferRequest", "ModelInferResponse", false},
      {"ModelStreamInfer", "ModelInferRequest", "ModelStreamInferResponse", true},
      {"ModelConfig", "ModelConfigRequest", "ModelConfigResponse", false},
      {"ModelStatistics", "ModelStatisticsRequest", "ModelStatisticsResponse", false},
      {"RepositoryIndex", "RepositoryIndexRequest", "RepositoryIndexResponse", false},
      {"RepositoryModelLoad", "RepositoryModelLoadRequest", "RepositoryModelLoadResponse", false},
      {"RepositoryModelUnload", "RepositoryModelUnloadRequest", "RepositoryModelUnloadResponse",
       false},
      {"SystemSharedMemoryStatus", "SystemSharedMemoryStatusRequest",
       "SystemSharedMemoryStatusResponse", false},
      {"SystemSharedMemoryRegister", "SystemSharedMemoryRegisterRequest",
       "SystemSharedMemoryRegisterResponse", false},
      {"SystemSharedMemoryUnregister", "SystemSharedMemoryUnregisterRequest",
       "SystemSharedMemoryUnregisterResponse", false},
      {"CudaSharedMemoryStatus", "CudaSharedMemoryStatusRequest", "CudaSharedMemoryStatusResponse",
       false},
      {"CudaSharedMemoryRegister", "CudaSharedMemoryRegisterRequest",
       "CudaSharedMemoryRegisterResponse", false},
      {"CudaSharedMemoryUnregister", "CudaSharedMemoryUnregisterRequest",
       "CudaSharedMemoryUnregisterResponse", false},
  };
  for (const Method& m : methods) {
    const auto* method = service->FindMethodByName(m.name);
    ASSERT_NE(method, nullptr) << m.name;
    EXPECT_EQ(method->input_type()->full_name(), std::string("inference.") + m.input) << m.name;
    EXPECT_EQ(method->output_type()->full_name(), std::string("inference.") + m.output) << m.name;
    EXPECT_EQ(method->client_streaming(), m.streaming) << m.name;
    EXPECT_EQ(method->server_streaming(), m.streaming) << m.name;
  }
}

}  // namespace
}  // namespace harrier
