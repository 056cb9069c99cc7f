package schemas

// API pinned for the other packages; implemented by the schemas work.
//
//   func NewRegistry() *Registry
//       A registry holding the built-in sys/ schemas, compiled.
//   func (r *Registry) Define(defs []SchemaDef) error
//       Compile user defs (may reference each other and sys/ defs by name).
//       Returns DefErrors listing every problem; on error the registry is unchanged.
//   func (r *Registry) Has(name string) bool
//   func (r *Registry) Arms(name string) []Arm      // nil unless a variant
//   func (r *Registry) Names() []string             // sorted
//   func (r *Registry) FromJSON(name string, js []byte) ([]byte, error)
//       Validate JSON against schema `name`, convert to canonical CBOR (schema-driven).
//   func (r *Registry) FromValue(name string, v any) ([]byte, error)
//       Same for an already-decoded JSON value (json.Number numbers or float64).
//   func (r *Registry) Validate(name string, cbor []byte) error
//       cbor must be canonical and valid against schema `name`.
//   func ToJSON(cbor []byte) ([]byte, error)   // display form: bytes as base64 strings
//   func ToJSONValue(cbor []byte) (any, error)
