// Generated from src/http/error.rs (ErrorCode::FINAL_FOR_A_JOIN) by its
// test: do not edit. The refusals of a join that asking again cannot
// change: the client stops and tells its page why.
export const FINAL_REFUSALS = [
  'room_not_accepting',
  'code_required',
  'invalid_code',
  'code_used',
  'user_required',
  'invalid_user_token',
  'room_not_found',
  'not_found',
  'room_closed'
];
