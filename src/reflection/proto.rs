//! The messages of gRPC's server reflection protocol (grpc/grpc-proto,
//! `grpc/reflection/v1/reflection.proto`), the few fields soakd uses.
//!
//! `v1` and `v1alpha` have the same messages under two package names, so
//! one set of types serves both; only the call's path differs. The
//! request's and response's `oneof`s are written as optional fields with
//! the oneof members' tags, which is the same thing on the wire.

use prost::Message;

/// The call's path on each version, newest first.
pub const PATHS: [&str; 2] = [
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// `ServerReflectionRequest`: one question.
#[derive(Clone, PartialEq, Message)]
pub struct Request {
    /// `host` (unused by servers in practice).
    #[prost(string, tag = "1")]
    pub host: String,
    /// `file_by_filename`: a file by its name.
    #[prost(string, optional, tag = "3")]
    pub file_by_filename: Option<String>,
    /// `file_containing_symbol`: the file defining a fully-qualified
    /// symbol (a service, message, method).
    #[prost(string, optional, tag = "4")]
    pub file_containing_symbol: Option<String>,
    /// `list_services`: every service (the value is ignored).
    #[prost(string, optional, tag = "7")]
    pub list_services: Option<String>,
}

/// `ServerReflectionResponse`: one answer.
#[derive(Clone, PartialEq, Message)]
pub struct Response {
    /// `file_descriptor_response`.
    #[prost(message, optional, tag = "4")]
    pub file_descriptor_response: Option<FileDescriptorResponse>,
    /// `list_services_response`.
    #[prost(message, optional, tag = "6")]
    pub list_services_response: Option<ListServiceResponse>,
    /// `error_response`.
    #[prost(message, optional, tag = "7")]
    pub error_response: Option<ErrorResponse>,
}

/// `FileDescriptorResponse`: serialized FileDescriptorProtos (the file
/// asked for, and maybe some of its dependencies).
#[derive(Clone, PartialEq, Message)]
pub struct FileDescriptorResponse {
    /// The files.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub file_descriptor_proto: Vec<Vec<u8>>,
}

/// `ListServiceResponse`.
#[derive(Clone, PartialEq, Message)]
pub struct ListServiceResponse {
    /// The services.
    #[prost(message, repeated, tag = "1")]
    pub service: Vec<ServiceResponse>,
}

/// `ServiceResponse`.
#[derive(Clone, PartialEq, Message)]
pub struct ServiceResponse {
    /// The service's full name.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// `ErrorResponse`: the question could not be answered.
#[derive(Clone, PartialEq, Message)]
pub struct ErrorResponse {
    /// A gRPC status code (NOT_FOUND for an unknown symbol).
    #[prost(int32, tag = "1")]
    pub error_code: i32,
    /// Why.
    #[prost(string, tag = "2")]
    pub error_message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_encode_as_the_oneof_would() {
        let r = Request {
            file_containing_symbol: Some("a.B".into()),
            ..Default::default()
        };
        // Field 4, length-delimited, "a.B".
        assert_eq!(r.encode_to_vec(), [0x22, 3, b'a', b'.', b'B']);
        let r = Request {
            list_services: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(r.encode_to_vec(), [0x3a, 0]);
    }
}
