//! The path parameters the API description names (`{room}`, `{claim}`),
//! as utoipa reads them from a handler's `params(...)`. Their own file, so
//! that the handlers and the description that gathers the handlers
//! (`openapi.rs`) do not refer to each other.

/// The `{room}` of a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct RoomPath {
    /// The room's id (`[a-z0-9-]{1,64}`).
    #[param(example = "demo")]
    room: String,
}

/// The `{room}` and `{claim}` of a claim's path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct ClaimPath {
    /// The room's id (`[a-z0-9-]{1,64}`).
    #[param(example = "demo")]
    room: String,
    /// The claim's `claim_id`.
    claim: String,
}
