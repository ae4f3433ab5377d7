"""TensorFlow's protobuf messages without TensorFlow.

TensorBoard (a dependency of this package) ships TensorFlow's graph, function, node, attr, types,
meta_graph and saver protos under `tensorboard.compat.proto`, compiled from the same .proto files
into the protobuf package "tensorboard" (so that they never clash with TensorFlow's own copies).
The wire and text formats are those of TensorFlow's messages: a GraphDef written by TensorFlow
parses into `GraphDef` here, field for field.

Two messages are not shipped there and are built here with protobuf's descriptor API from their
published definitions:
  * `SavedModel` (tensorflow/core/protobuf/saved_model.proto):
        int64 saved_model_schema_version = 1; repeated MetaGraphDef meta_graphs = 2;
  * `SavedMetadata` of Keras-2 SavedModels' keras_metadata.pb (keras/protobuf/saved_metadata.proto):
        SavedMetadata { repeated SavedObject nodes = 1; }
        SavedObject { int32 node_id = 2; string node_path = 3; string identifier = 4;
                      string metadata = 5; VersionDef version = 6; reserved 1; }

Importing this module imports no TensorFlow. Messages built by TensorFlow (a GraphDef from
`tf.Graph.as_graph_def()`) are other Python classes with the same fields; `as_graph_def()`
converts one into this module's `GraphDef` through the wire format.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorboard.compat.proto import (
    attr_value_pb2,
    graph_pb2,
    meta_graph_pb2,
    types_pb2,
    versions_pb2,
)

GraphDef = graph_pb2.GraphDef
MetaGraphDef = meta_graph_pb2.MetaGraphDef
AttrValue = attr_value_pb2.AttrValue
DataType = types_pb2.DataType
DT_HALF, DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_INT32 = (
    types_pb2.DT_HALF,
    types_pb2.DT_FLOAT,
    types_pb2.DT_DOUBLE,
    types_pb2.DT_BFLOAT16,
    types_pb2.DT_INT32,
)

_PACKAGE = "tf_fp16ops.audit"
_FILE = "tf_fp16ops/audit/saved_model_messages.proto"


def _file_proto() -> descriptor_pb2.FileDescriptorProto:
    F = descriptor_pb2.FieldDescriptorProto
    fp = descriptor_pb2.FileDescriptorProto(name=_FILE, package=_PACKAGE, syntax="proto3")
    fp.dependency.extend([meta_graph_pb2.DESCRIPTOR.name, versions_pb2.DESCRIPTOR.name])

    def message(name, fields):
        m = fp.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
        return m

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message(
        "SavedModel",
        [
            ("saved_model_schema_version", 1, F.TYPE_INT64, opt, None),
            ("meta_graphs", 2, F.TYPE_MESSAGE, rep, "." + MetaGraphDef.DESCRIPTOR.full_name),
        ],
    )
    message("SavedMetadata", [("nodes", 1, F.TYPE_MESSAGE, rep, f".{_PACKAGE}.SavedObject")])
    saved_object = message(
        "SavedObject",
        [
            ("node_id", 2, F.TYPE_INT32, opt, None),
            ("node_path", 3, F.TYPE_STRING, opt, None),
            ("identifier", 4, F.TYPE_STRING, opt, None),
            ("metadata", 5, F.TYPE_STRING, opt, None),
            ("version", 6, F.TYPE_MESSAGE, opt, "." + versions_pb2.VersionDef.DESCRIPTOR.full_name),
        ],
    )
    saved_object.reserved_range.add(start=1, end=2)
    return fp


def _message_classes():
    pool = descriptor_pool.Default()
    try:
        fd = pool.FindFileByName(_FILE)
    except KeyError:
        fd = pool.Add(_file_proto())
    return tuple(
        message_factory.GetMessageClass(fd.message_types_by_name[n])
        for n in ("SavedModel", "SavedMetadata")
    )


SavedModel, SavedMetadata = _message_classes()


def is_graph_def(obj) -> bool:
    """Whether `obj` is a GraphDef message: this module's, TensorFlow's or another copy's."""
    desc = getattr(obj, "DESCRIPTOR", None)
    return (
        desc is not None
        and getattr(desc, "name", None) == "GraphDef"
        and hasattr(obj, "node")
        and hasattr(obj, "library")
    )


def as_graph_def(gd) -> GraphDef:
    """`gd` itself when it is this module's GraphDef, else a copy of it as one (wire format)."""
    if isinstance(gd, GraphDef):
        return gd
    out = GraphDef()
    out.ParseFromString(gd.SerializeToString())
    return out
